package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Results of an admission request, the label of AdmissionRequests.
const (
	ResultReported  = "reported"
	ResultUnchanged = "unchanged"
	ResultDryRun    = "dry_run"
	ResultIgnored   = "ignored"
	ResultMalformed = "malformed"
)

// Reasons of ReportFailures.
const (
	// ReasonUnreachable: no answer from the listener (connection, TLS,
	// timeout); retried.
	ReasonUnreachable = "unreachable"
	// ReasonServerError: the listener answered 5xx; retried.
	ReasonServerError = "server_error"
	// ReasonThrottled: the listener answered 429, the runtime is over its
	// rate limit; retried after the answer's Retry-After without using up an
	// attempt.
	ReasonThrottled = "throttled"
	// ReasonRejected: the listener refused the report (4xx); not retried,
	// since sending it again cannot change the answer.
	ReasonRejected = "rejected"
	// ReasonRetriesExhausted: dropped after the last attempt; the control
	// plane's periodic reconcile picks the change up instead.
	ReasonRetriesExhausted = "retries_exhausted"
	// ReasonTooLarge: the encoded report was over the size limit; dropped.
	ReasonTooLarge = "too_large"
	// ReasonQueueFull: too many objects waiting to be reported; dropped, so
	// that the agent's memory stays bounded.
	ReasonQueueFull = "queue_full"
	// ReasonNoCredentials: the client certificate is not loaded yet.
	ReasonNoCredentials = "no_credentials"
)

// Metrics are the agent's Prometheus metrics, on a registry of its own so
// that several agents can run in one process (tests, dev environment).
type Metrics struct {
	Registry *prometheus.Registry

	// AdmissionRequests counts webhook calls by operation and result.
	AdmissionRequests *prometheus.CounterVec
	// ReportsSent counts reports the listener accepted.
	ReportsSent prometheus.Counter
	// ReportsCoalesced counts reports merged into one still waiting for the
	// same object.
	ReportsCoalesced prometheus.Counter
	// ReportRetries counts attempts after the first. A report sent again
	// after a 429 does not use up an attempt; ReportFailures{throttled}
	// counts those.
	ReportRetries prometheus.Counter
	// ReportFailures counts failed attempts and dropped reports by reason.
	ReportFailures *prometheus.CounterVec
	// ReportLatency observes the time from the admission request to the
	// listener's acceptance.
	ReportLatency prometheus.Histogram
	// Heartbeats counts heartbeats by result (ok, failed).
	Heartbeats *prometheus.CounterVec
	// CertificateReloads counts client and serving certificates loaded.
	CertificateReloads *prometheus.CounterVec
	// Pending is the number of objects waiting to be reported.
	Pending prometheus.Gauge
}

func newMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		AdmissionRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_watcher_admission_requests_total",
			Help: "Admission requests by operation and result (reported, unchanged, dry_run, ignored, malformed).",
		}, []string{"operation", "result"}),
		ReportsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runtime_watcher_reports_sent_total",
			Help: "Reports the listener accepted.",
		}),
		ReportsCoalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runtime_watcher_reports_coalesced_total",
			Help: "Reports merged into a report of the same object still waiting to be sent.",
		}),
		ReportRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runtime_watcher_report_retries_total",
			Help: "Report attempts after the first.",
		}),
		ReportFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_watcher_report_failures_total",
			Help: "Failed report attempts and dropped reports by reason.",
		}, []string{"reason"}),
		ReportLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "runtime_watcher_report_latency_seconds",
			Help:    "Time from the admission request to the listener accepting the report.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		Heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_watcher_heartbeats_total",
			Help: "Heartbeats sent to the listener by result.",
		}, []string{"result"}),
		CertificateReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_watcher_certificate_reloads_total",
			Help: "Certificates loaded from their Secrets, by kind (client, serving).",
		}, []string{"kind"}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runtime_watcher_reports_pending",
			Help: "Objects waiting to be reported.",
		}),
	}
	m.Registry.MustRegister(m.AdmissionRequests, m.ReportsSent, m.ReportsCoalesced, m.ReportRetries, m.ReportFailures,
		m.ReportLatency, m.Heartbeats, m.CertificateReloads, m.Pending,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

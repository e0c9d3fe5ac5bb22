package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Agent are the runtime-watcher agent's Prometheus metrics, on a registry of
// their own (not controller-runtime's): the agent serves them itself, and
// several agents can run in one process (tests, dev environment). The label
// values are the agent package's Result* and Reason* constants.
type Agent struct {
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

// NewAgent returns one agent's metrics, registered on a new registry with
// the Go and process collectors.
func NewAgent() *Agent {
	m := &Agent{
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

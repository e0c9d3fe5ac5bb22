package listener

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reasons of Rejected.
const (
	// ReasonTLSHandshake: no or an untrusted client certificate, or not TLS
	// 1.3; the connection never reaches HTTP.
	ReasonTLSHandshake = "tls_handshake"
	// ReasonCertificateExpired: the certificate expired while its connection
	// was open.
	ReasonCertificateExpired = "certificate_expired"
	// ReasonUnknownRuntime: no Kyma carries the certificate's runtime id (for
	// example its Kyma was deleted).
	ReasonUnknownRuntime = "unknown_runtime"
	// ReasonRuntimeMismatch: the report names a Kyma of another runtime.
	ReasonRuntimeMismatch = "runtime_mismatch"
	// ReasonTooLarge: the body is over the size limit.
	ReasonTooLarge = "too_large"
	// ReasonMalformed: the body is not a valid report.
	ReasonMalformed = "malformed"
	// ReasonBusy: the Kyma work queue did not take the report in time; the
	// agent retries.
	ReasonBusy = "busy"
	// ReasonLookup: the Kymas could not be read; the agent retries.
	ReasonLookup = "lookup_failed"
	// ReasonRateLimited: the runtime is over its report rate (429 with
	// Retry-After); the agent retries then.
	ReasonRateLimited = "rate_limited"
)

// The listener's metrics, served with the operator's others.
var (
	// Requests counts requests by path and status code.
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_requests_total",
		Help: "Listener requests by path and HTTP status code.",
	}, []string{"path", "code"})

	// Rejected counts refused connections and requests by reason.
	Rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_rejected_total",
		Help: "Connections and requests the listener refused, by reason.",
	}, []string{"reason"})

	// ReportsAccepted counts reports that requeued a Kyma (and, for a module
	// resource, its Manifest).
	ReportsAccepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_reports_accepted_total",
		Help: "Reports accepted; each requeued its Kyma (and a module resource's Manifest).",
	})

	// Latency observes how long the listener takes to answer.
	Latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lifecycle_manager_listener_request_duration_seconds",
		Help:    "Time the listener takes to answer a request, by path.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"path"})

	// Rechecks counts the second requeues of reported Kymas and Manifests
	// (see Options.RecheckAfter).
	Rechecks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_rechecks_total",
		Help: "Reported Kymas and Manifests requeued once more after the recheck delay.",
	})

	// InFlight is the number of requests being answered.
	InFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_listener_in_flight_requests",
		Help: "Requests the listener is answering.",
	})

	// RateLimitBuckets is the number of runtimes the rate limiter holds a
	// token bucket for: those that sent a request recently.
	RateLimitBuckets = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_listener_rate_limit_buckets",
		Help: "Runtimes the listener's per-runtime rate limiter holds a token bucket for (those that sent a request recently).",
	})

	// FallbackRequeues counts Kymas requeued by the second path because their
	// runtime's agent went quiet.
	FallbackRequeues = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_watcher_fallback_requeues_total",
		Help: "Kymas requeued because no report or heartbeat came from their runtime within the timeout.",
	})

	// SilentRuntimes is the number of watched runtimes without a recent
	// heartbeat at the last fallback round.
	SilentRuntimes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_watcher_silent_runtimes",
		Help: "Watched runtimes from which no report or heartbeat came within the timeout.",
	})
)

func init() { //nolint:gochecknoinits // metrics register with the process-wide registry once
	crmetrics.Registry.MustRegister(Requests, Rejected, ReportsAccepted, Rechecks, Latency, InFlight, RateLimitBuckets, FallbackRequeues, SilentRuntimes)
}

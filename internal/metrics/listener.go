package metrics

import "github.com/prometheus/client_golang/prometheus"

// The watcher listener's metrics, served with the operator's others. The
// reason label values are the listener package's Reason* constants.
var (
	// ListenerRequests counts requests by path and status code.
	ListenerRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_requests_total",
		Help: "Listener requests by path and HTTP status code.",
	}, []string{"path", "code"})

	// ListenerRejected counts refused connections and requests by reason.
	ListenerRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_rejected_total",
		Help: "Connections and requests the listener refused, by reason.",
	}, []string{"reason"})

	// ListenerReportsAccepted counts reports that requeued a Kyma (and, for
	// a module resource, its Manifest).
	ListenerReportsAccepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_reports_accepted_total",
		Help: "Reports accepted; each requeued its Kyma (and a module resource's Manifest).",
	})

	// ListenerLatency observes how long the listener takes to answer.
	ListenerLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lifecycle_manager_listener_request_duration_seconds",
		Help:    "Time the listener takes to answer a request, by path.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"path"})

	// ListenerRechecks counts the second requeues of reported Kymas and
	// Manifests (see listener.Options.RecheckAfter).
	ListenerRechecks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_listener_rechecks_total",
		Help: "Reported Kymas and Manifests requeued once more after the recheck delay.",
	})

	// ListenerInFlight is the number of requests being answered.
	ListenerInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_listener_in_flight_requests",
		Help: "Requests the listener is answering.",
	})

	// ListenerRateLimitBuckets is the number of runtimes the rate limiter
	// holds a token bucket for: those that sent a request recently.
	ListenerRateLimitBuckets = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_listener_rate_limit_buckets",
		Help: "Runtimes the listener's per-runtime rate limiter holds a token bucket for (those that sent a request recently).",
	})

	// WatcherFallbackRequeues counts Kymas requeued by the second path
	// because their runtime's agent went quiet.
	WatcherFallbackRequeues = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_watcher_fallback_requeues_total",
		Help: "Kymas requeued because no report or heartbeat came from their runtime within the timeout.",
	})

	// WatcherSilentRuntimes is the number of watched runtimes without a
	// recent heartbeat at the last fallback round.
	WatcherSilentRuntimes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_watcher_silent_runtimes",
		Help: "Watched runtimes from which no report or heartbeat came within the timeout.",
	})
)

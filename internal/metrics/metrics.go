// Package metrics defines every Prometheus metric of the project, so that
// their names, labels and registries are in one place. The operator's and
// the watcher listener's are registered on controller-runtime's registry and
// served with its own work-queue and reconcile metrics; the runtime-watcher
// agent's get a registry per agent (NewAgent).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// The results of a Manifest check (ManifestChecks).
const (
	CheckUnchanged = "unchanged"
	CheckReconcile = "reconcile"
)

var (
	// ManifestReconciles counts Manifest reconciles.
	ManifestReconciles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_manifest_reconciles_total",
		Help: "Manifest reconciles started.",
	})

	// ManifestChecks counts the periodic checks of Ready Manifests that ran
	// without a reconcile, by result.
	ManifestChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_manifest_checks_total",
		Help: "Periodic checks of Ready Manifests made without a reconcile, by result: unchanged, or reconcile (something changed, and the Manifest is reconciled in full).",
	}, []string{"result"})

	// KymaReconciles counts Kyma reconciles.
	KymaReconciles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifecycle_manager_kyma_reconciles_total",
		Help: "Kyma reconciles started.",
	})

	// Requeues counts requeues by reason.
	Requeues = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_requeues_total",
		Help: "Requeues by controller and reason: the state whose interval applies, or Error for a backoff.",
	}, []string{"controller", "reason"})

	// KymaState is 1 for the state each Kyma is in, 0 for the others.
	KymaState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_kyma_state",
		Help: "1 for the current state of a Kyma.",
	}, []string{"kyma", "state"})

	// ModuleState is 1 for the state each module of each Kyma is in.
	ModuleState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_module_state",
		Help: "1 for the current state of a module in a Kyma.",
	}, []string{"kyma", "module", "state"})

	// ModuleTimeToReady observes how long modules take from Processing or
	// Error to Ready.
	ModuleTimeToReady = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lifecycle_manager_module_time_to_ready_seconds",
		Help:    "Time a module takes from Processing or Error to Ready.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
	}, []string{"module"})

	// RuntimeSlotsFull counts reconciles that found every slot of their
	// runtime taken (--max-workers-per-runtime) and requeued.
	RuntimeSlotsFull = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_runtime_slots_full_total",
		Help: "Reconciles requeued because their runtime already had --max-workers-per-runtime reconciles at work.",
	}, []string{"controller"})

	// RuntimeSlotsBorrowed counts reconciles over their runtime's cap that
	// took a worker nobody else needed (the cap is work-conserving).
	RuntimeSlotsBorrowed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycle_manager_runtime_slots_borrowed_total",
		Help: "Reconciles let in beyond --max-workers-per-runtime because their runtime answers, no other runtime waited and a worker stayed free.",
	}, []string{"controller"})
)

// operatorCollectors are the operator's and the listener's metrics, served
// from controller-runtime's registry.
func operatorCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		ManifestReconciles, KymaReconciles, Requeues, KymaState, ModuleState, ModuleTimeToReady, RuntimeSlotsFull, RuntimeSlotsBorrowed, ManifestChecks,
		ListenerRequests, ListenerRejected, ListenerReportsAccepted, ListenerRechecks, ListenerLatency,
		ListenerInFlight, ListenerRateLimitBuckets, WatcherFallbackRequeues, WatcherSilentRuntimes,
		RolloutPhase, RolloutWave, RolloutRuntimes, RolloutHalted, RolloutRollingBack, RolloutLastProgress, RolloutPlanned,
		ShardLeader, CachedObjects,
	}
}

func init() { //nolint:gochecknoinits // metrics register with the process-wide registry once
	crmetrics.Registry.MustRegister(operatorCollectors()...)
	crmetrics.Registry.MustRegister(backupCollectors()...)
	// Both results exist from the start, so that the dashboard's rate of
	// checks and its alerts see the series before the first check.
	for _, result := range []string{CheckUnchanged, CheckReconcile} {
		ManifestChecks.WithLabelValues(result).Add(0)
	}
}

// CountRequeue counts why a controller will look at an object again: the
// error backoff, or the interval of the state it is in.
func CountRequeue(controller string, state v1beta2.State, err error) {
	reason := string(state)
	switch {
	case err != nil:
		reason = "Error"
	case reason == "":
		reason = "Unknown"
	}
	Requeues.WithLabelValues(controller, reason).Inc()
}

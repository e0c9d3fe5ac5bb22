package metrics

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// The rollouts' metrics (SPEC G1, docs/rollouts.md "Watching a rollout").
// Each ModuleRollout has a few series, labelled by its name, module and
// channel (empty for a mandatory module), never by runtime: the fleet's
// size does not change their number. The planner sets them (SetRollout)
// each time it records a rollout's status; every operator process reports
// when the planner last looked at each rollout (RolloutPlanned), since a
// planner that does not run cannot say so itself.

// The states of RolloutRuntimes' state label.
const (
	RolloutRuntimesDone     = "done"
	RolloutRuntimesInFlight = "in_flight"
	RolloutRuntimesFailed   = "failed"
	RolloutRuntimesPending  = "pending"
)

// rolloutPhases are the values of RolloutPhase's phase label, each of which
// has a series for every rollout.
var rolloutPhases = []v1beta2.RolloutPhase{v1beta2.RolloutCompleted, v1beta2.RolloutProgressing, v1beta2.RolloutPaused, v1beta2.RolloutHalted}

var rolloutLabels = []string{"rollout", "module", "channel"}

// rolloutLabelsAnd are a rollout's labels and one more.
func rolloutLabelsAnd(name string) []string {
	return append(slices.Clone(rolloutLabels), name)
}

var (
	// RolloutPhase is 1 for the phase each rollout is in, 0 for the
	// others; all 0 before the planner first looked at it.
	RolloutPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_rollout_phase",
		Help: "1 for the current phase of a ModuleRollout (Completed, Progressing, Paused, Halted), 0 for the others.",
	}, rolloutLabelsAnd("phase"))

	// RolloutWave is the wave in flight or last finished.
	RolloutWave = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_rollout_wave",
		Help: "The wave of a ModuleRollout in flight or last finished: 0 is the canary, -1 none yet.",
	}, rolloutLabels)

	// RolloutRuntimes counts a rollout's runtimes by state; the four add
	// up to the runtimes in the rollout.
	RolloutRuntimes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_rollout_runtimes",
		Help: "Runtimes of a ModuleRollout by state: done (Ready at the new version), in_flight (in the current wave), failed, pending (waiting for a wave).",
	}, rolloutLabelsAnd("state"))

	// RolloutHalted is 1 while a rollout is halted: no wave starts until
	// someone resumes it or rolls it back.
	RolloutHalted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_rollout_halted",
		Help: "1 while a ModuleRollout is halted (no wave starts until it is resumed or rolled back), else 0.",
	}, rolloutLabels)

	// RolloutRollingBack is 1 while a rollback (spec.rollback) moves a
	// rollout's runtimes back to the earlier version.
	RolloutRollingBack = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_rollout_rolling_back",
		Help: "1 while a ModuleRollout rolls its runtimes back to the earlier version (spec.rollback, not refused, not completed), else 0.",
	}, rolloutLabels)

	// RolloutLastProgress is when a rollout last made progress, as Unix
	// seconds: see the rollout controller's metrics.go for what counts.
	RolloutLastProgress = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_rollout_last_progress_timestamp_seconds",
		Help: "When a ModuleRollout last made progress (a runtime reached the new version, a wave started, the rollout started or resumed; a running soak counts as progress until it ends), in Unix seconds.",
	}, rolloutLabels)

	// RolloutPlanned reports, from every operator process, when the
	// planner last looked at each rollout (status.plannedAt).
	RolloutPlanned prometheus.Collector = rolloutPlans
)

// Rollout is what SetRollout exports of one rollout.
type Rollout struct {
	Name, Module, Channel string
	Phase                 v1beta2.RolloutPhase
	Wave                  int32
	// Done, InFlight, Failed and Pending count the runtimes by state.
	Done, InFlight, Failed, Pending int32
	Halted, RollingBack             bool
	LastProgress                    time.Time
}

func (r Rollout) labels() prometheus.Labels {
	return prometheus.Labels{"rollout": r.Name, "module": r.Module, "channel": r.Channel}
}

// rolloutSeries remembers the labels each rollout's series were set with,
// so that ForgetRollout deletes them by their full labels.
var rolloutSeries = struct {
	sync.Mutex
	byName map[string]prometheus.Labels
}{byName: map[string]prometheus.Labels{}}

// SetRollout sets every series of a rollout.
func SetRollout(r Rollout) {
	labels := r.labels()
	rolloutSeries.Lock()
	defer rolloutSeries.Unlock()
	if old, ok := rolloutSeries.byName[r.Name]; ok && !maps.Equal(old, labels) {
		deleteRolloutSeries(old)
	}
	rolloutSeries.byName[r.Name] = labels
	for _, phase := range rolloutPhases {
		RolloutPhase.With(with(labels, "phase", string(phase))).Set(boolValue(r.Phase == phase))
	}
	RolloutWave.With(labels).Set(float64(r.Wave))
	for state, n := range map[string]int32{
		RolloutRuntimesDone: r.Done, RolloutRuntimesInFlight: r.InFlight, RolloutRuntimesFailed: r.Failed, RolloutRuntimesPending: r.Pending,
	} {
		RolloutRuntimes.With(with(labels, "state", state)).Set(float64(n))
	}
	RolloutHalted.With(labels).Set(boolValue(r.Halted))
	RolloutRollingBack.With(labels).Set(boolValue(r.RollingBack))
	RolloutLastProgress.With(labels).Set(float64(r.LastProgress.UnixNano()) / 1e9)
}

// ForgetRollout deletes the series SetRollout set for a rollout that is
// gone.
func ForgetRollout(name string) {
	rolloutSeries.Lock()
	defer rolloutSeries.Unlock()
	if old, ok := rolloutSeries.byName[name]; ok {
		deleteRolloutSeries(old)
		delete(rolloutSeries.byName, name)
	}
}

func deleteRolloutSeries(labels prometheus.Labels) {
	for _, phase := range rolloutPhases {
		RolloutPhase.Delete(with(labels, "phase", string(phase)))
	}
	for _, state := range []string{RolloutRuntimesDone, RolloutRuntimesInFlight, RolloutRuntimesFailed, RolloutRuntimesPending} {
		RolloutRuntimes.Delete(with(labels, "state", state))
	}
	for _, vec := range []*prometheus.GaugeVec{RolloutWave, RolloutHalted, RolloutRollingBack, RolloutLastProgress} {
		vec.Delete(labels)
	}
}

func with(labels prometheus.Labels, name, value string) prometheus.Labels {
	out := maps.Clone(labels)
	out[name] = value
	return out
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// rolloutPlannedDesc describes RolloutPlanned's one family.
var rolloutPlannedDesc = prometheus.NewDesc("lifecycle_manager_rollout_planned_timestamp_seconds",
	"When the rollout planner last looked at a ModuleRollout (status.plannedAt; its creation while never planned), in Unix seconds, as this process's cache sees it, with the rollout's phase.",
	rolloutLabelsAnd("phase"), nil)

// rolloutPlans is the collector behind RolloutPlanned: at each scrape it
// reads the rollouts from the caches of the operators of this process
// (one in production; several shards in the benchmark) and reports each
// rollout's plannedAt, the newest any of them saw. Every process reports
// it, whether it plans or not: a planner that is gone, or stuck, reports
// nothing of itself, and the Kyma controllers of every shard hold their
// modules while the plan is stale.
var rolloutPlans = &plansCollector{}

// planSource is one operator's view of the rollouts.
type planSource struct {
	reader    client.Reader
	namespace string
}

type plansCollector struct {
	sources sources[planSource]
}

// planListTimeout bounds one source's List at a scrape: a cache not synced
// yet must not hold the scrape.
const planListTimeout = 2 * time.Second

// ReportRolloutPlans makes this process report the rollouts in namespace,
// as reader (an operator's cache) sees them, until ctx ends.
func ReportRolloutPlans(ctx context.Context, reader client.Reader, namespace string) {
	rolloutPlans.sources.add(ctx, &planSource{reader: reader, namespace: namespace})
}

// Describe implements prometheus.Collector.
func (c *plansCollector) Describe(ch chan<- *prometheus.Desc) { ch <- rolloutPlannedDesc }

// Collect implements prometheus.Collector: one series per rollout name,
// module and channel, whichever source saw the latest plan.
func (c *plansCollector) Collect(ch chan<- prometheus.Metric) {
	sources := c.sources.list()
	type seen struct {
		phase string
		at    time.Time
	}
	latest := map[[3]string]seen{}
	for _, s := range sources {
		ctx, cancel := context.WithTimeout(context.Background(), planListTimeout)
		list := &v1beta2.ModuleRolloutList{}
		err := s.reader.List(ctx, list, client.InNamespace(s.namespace), client.UnsafeDisableDeepCopy)
		cancel()
		if err != nil {
			continue
		}
		for i := range list.Items {
			ro := &list.Items[i]
			at := ro.CreationTimestamp.Time
			if ro.Status.PlannedAt != nil {
				at = ro.Status.PlannedAt.Time
			}
			key := [3]string{ro.Name, ro.Spec.ModuleName, ro.Spec.Channel}
			if old, ok := latest[key]; !ok || at.After(old.at) {
				latest[key] = seen{phase: string(ro.Status.Phase), at: at}
			}
		}
	}
	for key, s := range latest {
		ch <- prometheus.MustNewConstMetric(rolloutPlannedDesc, prometheus.GaugeValue, float64(s.at.UnixNano())/1e9, key[0], key[1], key[2], s.phase)
	}
}

package rollout

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Analyzer evaluates a rollout's analyses (spec.analysis) for some of its
// runtimes.
type Analyzer interface {
	// Analyze returns, per Kyma of kymas, the outcome of every analysis of
	// the rollout for that runtime. A Kyma missing from the result counts
	// as inconclusive.
	Analyze(ctx context.Context, rollout *v1beta2.ModuleRollout, kymas []string) map[string]AnalysisOutcome
}

// AnalysisOutcome is how one runtime did in a rollout's analyses.
type AnalysisOutcome struct {
	// Failed names the analysis that failed and how ("error-rate: 0.2 >
	// max 0.05"); empty when none failed.
	Failed string
	// Inconclusive says why an analysis could not be evaluated (Prometheus
	// unreachable, the runtime unreadable); empty when all could.
	Inconclusive string
}

// noAnalyzer is why a rollout's analyses cannot run in an operator started
// without an analyzer.
const noAnalyzer = "the operator evaluates no analyses: start it with --analysis-prometheus-url"

// analyze runs the rollout's analyses for the members of its current wave
// that are Ready at the new version, once none of the wave is in flight
// any more (the wave's soak), and records the outcomes on runtimes. Plan
// lets the next wave start only after every such member passed.
//
// A finished rollout is not analysed: its gates were passed. Outcomes are
// reused for analysisReuse within the same wave and spec (a resume asks
// afresh), since a rollout is
// reconciled on every change of its Manifests and each analysis is a query
// per runtime.
func (r *Reconciler) analyze(ctx context.Context, rollout *v1beta2.ModuleRollout, runtimes []Runtime) {
	s := rollout.Status
	if len(rollout.Spec.Analysis) == 0 || len(s.WaveMembers) == 0 || len(s.InFlight) > 0 || s.Phase == v1beta2.RolloutCompleted {
		return
	}
	var kymas []string
	var at []int
	for i, rt := range runtimes {
		if rt.Version == s.ToVersion && rt.Current && rt.State == v1beta2.StateReady && slices.Contains(s.WaveMembers, rt.Kyma) {
			kymas = append(kymas, rt.Kyma)
			at = append(at, i)
		}
	}
	if len(kymas) == 0 {
		return
	}
	var outcomes map[string]AnalysisOutcome
	if r.Analyzer != nil {
		outcomes = r.analyses.get(rollout, kymas, func() map[string]AnalysisOutcome { return r.Analyzer.Analyze(ctx, rollout, kymas) })
	}
	for j, i := range at {
		outcome, ok := outcomes[kymas[j]]
		switch {
		case r.Analyzer == nil:
			outcome.Inconclusive = noAnalyzer
		case !ok:
			outcome.Inconclusive = "no outcome"
		}
		runtimes[i].Analysed = true
		runtimes[i].AnalysisFailed, runtimes[i].AnalysisInconclusive = outcome.Failed, outcome.Inconclusive
	}
}

// analysisReuse is how long a wave's analysis outcomes stand for the same
// runtimes before they are asked again.
const analysisReuse = 5 * time.Second

// analysisMemo remembers each rollout's last analysis outcomes.
type analysisMemo struct {
	mu   sync.Mutex
	last map[types.NamespacedName]analysed
}

type analysed struct {
	wave       int32
	generation int64
	kymas      []string
	at         time.Time
	outcomes   map[string]AnalysisOutcome
}

// get returns the outcomes for kymas of the rollout's current wave: those
// of the last run when it was for the same wave and runtimes less than
// analysisReuse ago, else run's.
func (m *analysisMemo) get(rollout *v1beta2.ModuleRollout, kymas []string, run func() map[string]AnalysisOutcome) map[string]AnalysisOutcome {
	key := client.ObjectKeyFromObject(rollout)
	m.mu.Lock()
	last, ok := m.last[key]
	m.mu.Unlock()
	now := time.Now() // the analysed system's time, whatever the planner's clock
	if ok && last.wave == rollout.Status.Wave && last.generation == rollout.Generation && slices.Equal(last.kymas, kymas) && now.Sub(last.at) < analysisReuse {
		return last.outcomes
	}
	outcomes := run()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.NamespacedName]analysed{}
	}
	m.last[key] = analysed{wave: rollout.Status.Wave, generation: rollout.Generation, kymas: slices.Clone(kymas), at: now, outcomes: outcomes}
	return outcomes
}

// forget drops a deleted rollout's outcomes.
func (m *analysisMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	delete(m.last, key)
	m.mu.Unlock()
}

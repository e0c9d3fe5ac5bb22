package rollout

import (
	"context"
	"slices"

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
func (r *Reconciler) analyze(ctx context.Context, rollout *v1beta2.ModuleRollout, runtimes []Runtime) {
	s := rollout.Status
	if len(rollout.Spec.Analysis) == 0 || len(s.WaveMembers) == 0 || len(s.InFlight) > 0 {
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
		outcomes = r.Analyzer.Analyze(ctx, rollout, kymas)
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

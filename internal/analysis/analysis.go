// Package analysis evaluates the health gates of ModuleRollouts
// (spec.analysis, SPEC G1): for each runtime of a soaking wave, PromQL
// queries against the Prometheus an SRE configured (--analysis-prometheus-url)
// compared with their bounds, and conditions of the module's custom
// resource read from the runtime. It implements rollout.Analyzer.
//
// Whatever keeps an analysis from being evaluated — Prometheus unreachable
// or refusing the query, a NaN, a runtime that cannot be read — makes it
// inconclusive, never passed: the planner holds the next wave until it is
// conclusive.
package analysis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/rollout"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Fleet is where the analyzer finds the runtimes of a rollout.
type Fleet struct {
	// Manifests reads the Manifests of every runtime: in a sharded
	// operator, the planner's cache of the whole fleet
	// (rollout.NewFleetCache), not its shard's.
	Manifests client.Reader
	// Runtimes reaches the runtimes. The operator's remote.Cache reads
	// the kubeconfig Secret of a runtime of another shard past its
	// shard's cache, so the planner of shard 0 reaches every runtime.
	Runtimes remote.Runtimes
	// Namespace holds the Kymas and their Manifests.
	Namespace string
	// SyncNamespace is where a namespaced custom resource that names no
	// namespace is, for a Kyma that chose none.
	SyncNamespace string
}

// Analyzer evaluates rollouts' analyses; see the package doc.
type Analyzer struct {
	prometheus promv1.API // nil without --analysis-prometheus-url
	fleet      Fleet
	timeout    time.Duration
	// slots bounds the queries and runtime reads in flight, across calls.
	slots chan struct{}
	// outage short-cuts queries while Prometheus is known to be out.
	outage outage
	// now tells the time of outages; time.Now but in tests.
	now func() time.Time
}

var _ rollout.Analyzer = (*Analyzer)(nil)

// New returns an analyzer with the options' Prometheus (none when its URL
// is empty); a zero Timeout or Concurrency is the default's. It fails on
// options that cannot work, so that the operator does not start with
// them: a malformed URL, a token or CA file that cannot be read, a token
// over plain http.
func New(opts Options, fleet Fleet) (*Analyzer, error) {
	if fleet.Manifests == nil || fleet.Runtimes == nil {
		return nil, errors.New("analysis: no Manifest reader or runtimes")
	}
	defaults := DefaultOptions()
	if opts.Timeout == 0 {
		opts.Timeout = defaults.Timeout
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = defaults.Concurrency
	}
	if opts.Timeout < 0 || opts.Concurrency < 0 {
		return nil, errors.New("--analysis-timeout and --analysis-concurrency cannot be negative")
	}
	a := &Analyzer{fleet: fleet, timeout: opts.Timeout, slots: make(chan struct{}, opts.Concurrency), now: time.Now}
	if opts.PrometheusURL == "" {
		return a, nil
	}
	rt, err := opts.roundTripper()
	if err != nil {
		return nil, err
	}
	c, err := promapi.NewClient(promapi.Config{Address: opts.PrometheusURL, RoundTripper: rt})
	if err != nil {
		return nil, err
	}
	a.prometheus = promv1.NewAPI(c)
	return a, nil
}

// verdict is one analysis's outcome for one runtime.
type verdict struct {
	failed, inconclusive string
}

func failed(name, format string, args ...any) verdict {
	return verdict{failed: name + ": " + fmt.Sprintf(format, args...)}
}

func inconclusive(name, format string, args ...any) verdict {
	return verdict{inconclusive: name + ": " + fmt.Sprintf(format, args...)}
}

// Analyze evaluates every analysis of the rollout for each of kymas, at
// most Options.Concurrency queries and runtime reads at once.
func (a *Analyzer) Analyze(ctx context.Context, ro *v1beta2.ModuleRollout, kymas []string) map[string]rollout.AnalysisOutcome {
	verdicts := make([][]verdict, len(ro.Spec.Analysis))
	var wg sync.WaitGroup
	for i, an := range ro.Spec.Analysis {
		verdicts[i] = make([]verdict, len(kymas))
		switch {
		case an.Prometheus != nil:
			a.analysePrometheus(ctx, &wg, an.Name, an.Prometheus, kymas, verdicts[i])
		case an.Condition != nil:
			a.analyseCondition(ctx, &wg, ro.Spec.ModuleName, an.Name, an.Condition, kymas, verdicts[i])
		default:
			for j := range kymas {
				verdicts[i][j] = failed(an.Name, "neither prometheus nor condition is set")
			}
		}
	}
	wg.Wait()
	outcomes := make(map[string]rollout.AnalysisOutcome, len(kymas))
	for j, k := range kymas {
		var f, inc []string
		for i := range verdicts {
			if v := verdicts[i][j]; v.failed != "" {
				f = append(f, v.failed)
			} else if v.inconclusive != "" {
				inc = append(inc, v.inconclusive)
			}
		}
		outcomes[k] = rollout.AnalysisOutcome{Failed: bounded(f), Inconclusive: bounded(inc)}
	}
	return outcomes
}

// maxMessage bounds what one runtime's outcome says; the status names up
// to 20 runtimes of each state with it.
const maxMessage = 512

func bounded(parts []string) string {
	s := strings.Join(parts, "; ")
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// start runs fn in a goroutine once one of the analyzer's slots is free,
// or at once when ctx ends first (fn's own calls then fail on ctx and say
// so).
func (a *Analyzer) start(ctx context.Context, wg *sync.WaitGroup, fn func(ctx context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case a.slots <- struct{}{}:
			defer func() { <-a.slots }()
		case <-ctx.Done():
		}
		ctx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		fn(ctx)
	}()
}

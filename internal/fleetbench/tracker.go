package fleetbench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
)

// moduleView is what the benchmark keeps of one module in a Kyma's status.
type moduleView struct {
	name    string
	version string
	state   v1beta2.State
	// manifestGeneration is the generation of the Manifest the status was
	// computed from.
	manifestGeneration int64
}

// kymaView is what the benchmark keeps of a Kyma: its state and modules.
type kymaView struct {
	state   v1beta2.State
	modules []moduleView
}

func viewOf(k *v1beta2.Kyma) kymaView {
	v := kymaView{state: k.Status.State, modules: make([]moduleView, 0, len(k.Status.Modules))}
	for _, m := range k.Status.Modules {
		mv := moduleView{name: m.Name, version: m.Version, state: m.State}
		if m.Manifest != nil {
			mv.manifestGeneration = m.Manifest.Generation
		}
		v.modules = append(v.modules, mv)
	}
	return v
}

// goal says when a Kyma counts as done in a phase: Ready, with all its
// modules Ready at the phase's version, or, when module is set, that
// module at the phase's version and the others Ready at theirs.
type goal struct {
	version string
	modules int
	// module, when set, is the only module the phase moves.
	module string
	// baseline is, per module, the Manifest generation the Kyma's status
	// showed when the phase began; nil when the phase creates the Manifests.
	// A module counts as upgraded only when its status comes from a newer
	// Manifest generation.
	baseline map[string]int64
}

// check reports whether the Kyma reached the goal, and whether it only
// looks as if it did: Ready at the new version, but computed from a
// Manifest generation from before the phase. The Kyma controller resolves
// the version from the catalog and reads the Manifest from its cache; a
// status written before the cache saw the Manifest's new spec pairs the
// new version with the old Manifest's Ready. Such a status is not counted
// as done.
func (g goal) check(v kymaView) (done, stale bool) {
	if v.state != v1beta2.StateReady || len(v.modules) != g.modules {
		return false, false
	}
	for _, m := range v.modules {
		moves := g.module == "" || m.name == g.module
		if m.state != v1beta2.StateReady || moves && m.version != g.version {
			return false, false
		}
		if moves && g.baseline != nil && m.manifestGeneration <= g.baseline[m.name] {
			stale = true
		}
	}
	return !stale, stale
}

// tracker follows every Kyma's status through a watch and records, per
// phase, when each Kyma first reached the phase's goal.
type tracker struct {
	total int

	mu     sync.Mutex
	latest map[string]kymaView
	phase  *phaseRecord
	// lastDone is how many Kymas the last phase finished with.
	lastDone int
}

// phaseRecord is one phase's progress.
type phaseRecord struct {
	start     time.Time
	goal      goal
	baselines map[string]map[string]int64 // by Kyma; nil without baseline
	done      map[string]time.Duration
	stale     map[string]bool
	finished  chan struct{}
}

func newTracker(total int) *tracker {
	return &tracker{total: total, latest: make(map[string]kymaView, total)}
}

// observe is the watch's event handler.
func (t *tracker) observe(obj any) {
	k, ok := obj.(*v1beta2.Kyma)
	if !ok {
		return
	}
	now := time.Now()
	v := viewOf(k)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.latest[k.Name] = v
	t.evaluate(k.Name, v, now)
}

// evaluate records a Kyma that reached the current phase's goal. t.mu held.
func (t *tracker) evaluate(name string, v kymaView, now time.Time) {
	p := t.phase
	if p == nil {
		return
	}
	if _, ok := p.done[name]; ok {
		return
	}
	g := p.goal
	if p.baselines != nil {
		g.baseline = p.baselines[name]
		if g.baseline == nil {
			g.baseline = map[string]int64{}
		}
	}
	done, stale := g.check(v)
	if stale {
		p.stale[name] = true
	}
	if !done {
		return
	}
	p.done[name] = now.Sub(p.start)
	if len(p.done) == t.total {
		close(p.finished)
	}
}

// begin starts a phase whose goal is g. With baseline, every module the
// phase moves must be reported from a newer Manifest generation than the
// Kyma shows now.
func (t *tracker) begin(g goal, baseline bool) *phaseRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := &phaseRecord{
		start:    time.Now(),
		goal:     g,
		done:     make(map[string]time.Duration, t.total),
		stale:    map[string]bool{},
		finished: make(chan struct{}),
	}
	if baseline {
		p.baselines = make(map[string]map[string]int64, len(t.latest))
		for name, v := range t.latest {
			gens := make(map[string]int64, len(v.modules))
			for _, m := range v.modules {
				gens[m.name] = m.manifestGeneration
			}
			p.baselines[name] = gens
		}
	}
	t.phase = p
	if t.total == 0 {
		close(p.finished)
	}
	for name, v := range t.latest {
		t.evaluate(name, v, p.start)
	}
	return p
}

// progress is how many Kymas reached the current phase's goal.
func (t *tracker) progress() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.phase == nil {
		return t.lastDone
	}
	return len(t.phase.done)
}

// end closes the current phase and returns, per Kyma that reached the goal,
// how long after the phase began it did, and how many Kymas were seen with
// a stale status.
func (t *tracker) end() (map[string]time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.phase
	t.phase = nil
	if p == nil {
		return nil, 0
	}
	t.lastDone = len(p.done)
	return p.done, len(p.stale)
}

// notDone describes a few Kymas that have not reached the goal, with each
// module that has not: its version, state and Manifest generation. It is
// the report of a phase that did not converge, and of stragglers.
func (t *tracker) notDone(limit int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.phase == nil {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(t.latest)) {
		if len(out) == limit {
			break
		}
		if _, ok := t.phase.done[name]; ok {
			continue
		}
		v := t.latest[name]
		g := t.phase.goal
		desc := fmt.Sprintf("%s %s", name, v.state)
		for _, m := range v.modules {
			if m.state != v1beta2.StateReady || (g.module == "" || m.name == g.module) && m.version != g.version {
				desc += fmt.Sprintf(" %s@%s=%s(gen %d)", m.name, m.version, m.state, m.manifestGeneration)
			}
		}
		if t.phase.stale[name] {
			desc += " (status from old Manifests)"
		}
		out = append(out, desc)
	}
	return out
}

// slimKyma keeps only what the tracker reads, so that the benchmark's own
// cache of thousands of Kymas stays small next to the operator's.
func slimKyma(obj any) (any, error) {
	k, ok := obj.(*v1beta2.Kyma)
	if !ok {
		return obj, nil // tombstones and the like pass unchanged
	}
	slim := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{
		Name: k.Name, Namespace: k.Namespace, ResourceVersion: k.ResourceVersion, Generation: k.Generation,
	}}
	slim.Status.State = k.Status.State
	for _, m := range k.Status.Modules {
		sm := v1beta2.ModuleStatus{Name: m.Name, Version: m.Version, State: m.State}
		if m.Manifest != nil {
			sm.Manifest = &v1beta2.TrackingObject{PartialMeta: v1beta2.PartialMeta{Generation: m.Manifest.Generation}}
		}
		slim.Status.Modules = append(slim.Status.Modules, sm)
	}
	return slim, nil
}

// watchKymas starts a watch of the Kymas in namespace that feeds t, and
// returns once it has synced. It runs until ctx is done.
func watchKymas(ctx context.Context, cfg *rest.Config, namespace string, t *tracker) error {
	return watchKind(ctx, cfg, namespace, &v1beta2.Kyma{}, slimKyma, t.observe)
}

// watchKind starts an informer of obj's kind in namespace that hands each added
// or updated object (through transform, when set) to observe, and returns
// once it has synced. It runs until ctx is done.
func watchKind(ctx context.Context, cfg *rest.Config, namespace string, obj client.Object, transform toolscache.TransformFunc, observe func(any)) error {
	kind := fmt.Sprintf("%T", obj)
	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform:  transform,
	})
	if err != nil {
		return fmt.Errorf("creating the watch of %s: %w", kind, err)
	}
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("creating the watch of %s: %w", kind, err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return fmt.Errorf("watching %s: %w", kind, err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the watch of %s did not sync: %w", kind, ctx.Err())
	}
	return nil
}

// Package testrollout watches what a rollout does to a fleet, for tests:
// which Kymas were asked for a version, in which order, and how many were
// on their way at once, from a watch of the control plane's Manifests.
package testrollout

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Trace records when each Kyma's Manifest of a module was asked for a
// version (its spec) and when it was Ready at it. Start it before the
// version moves: a Manifest already at the version counts as asked when
// first seen.
type Trace struct {
	mu     sync.Mutex
	events []transition
	seen   map[string]string
}

type transition struct {
	kyma  string
	ready bool // false: asked for the version; true: Ready at it
}

// Record starts a Trace of module's Manifests in namespace towards
// version; it ends with ctx.
func Record(ctx context.Context, c client.WithWatch, namespace, module, version string) (*Trace, error) {
	w, err := c.Watch(ctx, &v1beta2.ManifestList{}, client.InNamespace(namespace), client.MatchingLabels{v1beta2.ModuleNameLabel: module})
	if err != nil {
		return nil, err
	}
	tr := &Trace{seen: map[string]string{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1beta2.Manifest)
			if !ok || ev.Type == watch.Deleted || m.Spec.Version != version {
				continue
			}
			tr.note(m)
		}
	}()
	return tr, nil
}

func (tr *Trace) note(m *v1beta2.Manifest) {
	kymaName := m.Labels[v1beta2.KymaNameLabel]
	ready := m.Status.State == v1beta2.StateReady && m.Status.ObservedGeneration == m.Generation &&
		meta.IsStatusConditionTrue(m.Status.Conditions, "Ready")
	state := "asked"
	if ready {
		state = "ready"
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.seen[kymaName] == state {
		return
	}
	if tr.seen[kymaName] == "" && ready {
		tr.events = append(tr.events, transition{kyma: kymaName})
	}
	tr.seen[kymaName] = state
	tr.events = append(tr.events, transition{kyma: kymaName, ready: ready})
}

// Order is the Kymas in the order they were asked for the version, and
// the most that were asked and not yet Ready at any moment.
func (tr *Trace) Order() (asked []string, maxInFlight int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	inFlight := map[string]bool{}
	for _, ev := range tr.events {
		if ev.ready {
			delete(inFlight, ev.kyma)
			continue
		}
		asked = append(asked, ev.kyma)
		inFlight[ev.kyma] = true
		maxInFlight = max(maxInFlight, len(inFlight))
	}
	return asked, maxInFlight
}

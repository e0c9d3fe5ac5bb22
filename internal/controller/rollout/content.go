package rollout

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Pinned content (SPEC G1). A rollout pins its version's content links by
// digest when it starts (status.content), and every wave installs those
// bytes (the Kyma controller takes them from the status). The links are
// pinned again at most every Poll while the rollout moves: a tag that now
// resolves to another digest halts the rollout (Plan), since what the
// module team published under the version changed.

// pinMemo remembers each rollout's last pin, so that a rollout reconciled
// on every Manifest change asks its registry at most every Poll.
type pinMemo struct {
	mu   sync.Mutex
	pins map[types.NamespacedName]pinned
}

type pinned struct {
	version, template string
	at                time.Time
	content           []v1beta2.ContentResource
	err               error
}

// pinContent sets channel's content: the links of the version the rollout
// moves to (the channel's, or the one it rolled back to), pinned now or
// within the last Poll.
func (r *Reconciler) pinContent(ctx context.Context, rollout *v1beta2.ModuleRollout, catalog catalogView, channel *Channel) {
	version := channel.Version
	if rollingBack(rollout.Status, channel.Version) {
		version = rollout.Status.ToVersion
	}
	template, ok := catalog.Template(rollout.Spec.ModuleName, version)
	if !ok {
		return
	}
	if r.Content == nil {
		channel.ContentOf, channel.Content = version, template.Spec.Resources
		return
	}
	settled := rollout.Status.Phase == v1beta2.RolloutCompleted && rollout.Status.ToVersion == version && len(rollout.Status.Content) > 0
	now := time.Now() // the registry's load is counted in real time, whatever the planner's clock
	r.pins.mu.Lock()
	last, seen := r.pins.pins[client.ObjectKeyFromObject(rollout)]
	r.pins.mu.Unlock()
	if seen && last.version == version && last.template == ref(template) && (settled || now.Sub(last.at) < r.Poll) {
		channel.ContentOf, channel.Content, channel.PinErr = last.version, last.content, last.err
		return
	}
	content, err := r.Content.Pin(ctx, template)
	r.pins.mu.Lock()
	if r.pins.pins == nil {
		r.pins.pins = map[types.NamespacedName]pinned{}
	}
	r.pins.pins[client.ObjectKeyFromObject(rollout)] = pinned{version: version, template: ref(template), at: now, content: content, err: err}
	r.pins.mu.Unlock()
	channel.ContentOf, channel.Content, channel.PinErr = version, content, err
}

// forget drops a deleted rollout's pin.
func (m *pinMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	delete(m.pins, key)
	m.mu.Unlock()
}

package listener

import (
	"context"
	"fmt"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// Health remembers when each runtime's agent was last heard from (a report
// or a heartbeat). A runtime is silent when that was longer ago than the
// timeout; the Fallback then reconciles its Kyma more often, because changes
// in it may go unreported.
type Health struct {
	timeout time.Duration
	start   time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

// NewHealth returns a Health that calls a runtime silent after timeout
// without contact. Every runtime gets one timeout of grace from now, so that
// a restart of the operator does not look like a fleet-wide outage.
func NewHealth(timeout time.Duration) *Health {
	return &Health{timeout: timeout, start: time.Now(), seen: map[string]time.Time{}}
}

// Seen records contact with a runtime at t and reports whether the runtime
// counted as heard just before (Heard at t). A false answer is a transition
// (first contact, or contact after a silence), the only moment the Kyma's
// WatcherReporting condition needs a write; of concurrent contacts only one
// sees it. It is safe on a nil Health, which knows of no transitions.
func (h *Health) Seen(runtimeID string, t time.Time) (wasHeard bool) {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	last, ok := h.seen[runtimeID]
	wasHeard = ok && t.Sub(last) <= h.timeout
	if t.After(last) {
		h.seen[runtimeID] = t
	}
	return wasHeard
}

// forget drops the contact with a runtime recorded at t, unless a later one
// came since: a transition that could not be handed on (a full queue) is
// then a transition again at the next contact.
func (h *Health) forget(runtimeID string, t time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.seen[runtimeID].Equal(t) {
		delete(h.seen, runtimeID)
	}
	h.mu.Unlock()
}

// Silent reports whether no contact with the runtime came within the timeout
// before now.
func (h *Health) Silent(runtimeID string, now time.Time) bool {
	h.mu.Lock()
	last, ok := h.seen[runtimeID]
	h.mu.Unlock()
	if !ok || last.Before(h.start) {
		last = h.start
	}
	return now.Sub(last) > h.timeout
}

// Heard reports whether contact with the runtime came within the timeout
// before now. Unlike !Silent it gives no grace after a restart: a runtime
// counts as reporting only once it has been heard from.
func (h *Health) Heard(runtimeID string, now time.Time) bool {
	h.mu.Lock()
	last, ok := h.seen[runtimeID]
	h.mu.Unlock()
	return ok && now.Sub(last) <= h.timeout
}

// keepOnly forgets runtimes not in ids that were not heard from within the
// timeout before now. A runtime still heard is kept although not watched
// (reporting paused, its agent still sending heartbeats): forgotten, its
// next heartbeat would count as a transition and requeue its Kyma after
// every round. A runtime whose Kyma is gone is refused before Seen, so it
// ages out.
func (h *Health) keepOnly(ids map[string]bool, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, last := range h.seen {
		if !ids[id] && now.Sub(last) > h.timeout {
			delete(h.seen, id)
		}
	}
}

// Fallback is the second path of SPEC R9: while a runtime's agent reports,
// its Kyma is reconciled at the Kyma controller's slow Ready interval; when
// the agent goes silent (down, paused by a broken network, listener
// unreachable) the Fallback requeues the Kyma every Interval, so that changes
// the agent could not report are still picked up soon. It is a manager
// Runnable.
type Fallback struct {
	Reader    client.Reader
	Namespace string
	Health    *Health
	// Interval is how often silent runtimes' Kymas are requeued.
	Interval time.Duration
	// Watched tells whether a Kyma's runtime is expected to report at all
	// (it has a runtime id and reporting is not paused for it).
	Watched func(*v1beta2.Kyma) bool
	Requeue chan<- event.TypedGenericEvent[*v1beta2.Kyma]
}

// NeedLeaderElection keeps the Fallback with the Kyma controller.
func (f *Fallback) NeedLeaderElection() bool { return true }

// Start requeues silent runtimes' Kymas every Interval until ctx is done.
func (f *Fallback) Start(ctx context.Context) error {
	ticker := time.NewTicker(f.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if err := f.round(ctx, time.Now()); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Requeueing the Kymas of silent runtimes")
		}
	}
}

func (f *Fallback) round(ctx context.Context, now time.Time) error {
	list := &v1beta2.KymaList{}
	if err := f.Reader.List(ctx, list, client.InNamespace(f.Namespace)); err != nil {
		return fmt.Errorf("listing Kymas: %w", err)
	}
	ids := map[string]bool{}
	silent := 0
	for i := range list.Items {
		kyma := &list.Items[i]
		id := kyma.Labels[v1beta2.RuntimeIDLabel]
		if id == "" || !kyma.DeletionTimestamp.IsZero() || !f.Watched(kyma) {
			continue
		}
		ids[id] = true
		if !f.Health.Silent(id, now) {
			continue
		}
		silent++
		ev := event.TypedGenericEvent[*v1beta2.Kyma]{Object: &v1beta2.Kyma{}}
		ev.Object.Namespace, ev.Object.Name = kyma.Namespace, kyma.Name
		select {
		case f.Requeue <- ev:
			metrics.WatcherFallbackRequeues.Inc()
		case <-ctx.Done():
			return nil
		}
	}
	metrics.WatcherSilentRuntimes.Set(float64(silent))
	f.Health.keepOnly(ids, now)
	return nil
}

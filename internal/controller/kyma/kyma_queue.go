package kyma

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/priority"
)

// The Kyma controller's work queue (see internal/priority) makes runtimes
// finish one after another: a Kyma whose modules have all settled is
// reconciled (priority.Finishing) before any Kyma that is only starting, so
// it reports its outcome as soon as it can; a Kyma with nothing to finish —
// one that a catalog change, a Manifest still on its way, or our own write
// of a Manifest enqueues — waits behind both (priority.Background), and a
// burst of catalog changes is one pass per Kyma.

// catalogQuiet is how long the catalog must be quiet before the Kymas its
// changes affect are enqueued, and catalogMaxWait caps that wait. A
// fleet-wide upgrade of M modules is M ModuleReleaseMeta changes in a burst:
// without the wait, Kymas reconciled between two of them upgrade module by
// module, each in several passes.
const (
	catalogQuiet   = 500 * time.Millisecond
	catalogMaxWait = 2 * time.Second
)

var kymaGroupKind = schema.GroupKind{Group: v1beta2.GroupVersion.Group, Kind: "Kyma"}

// manifestEvents enqueues the Kyma that controls a Manifest: at once and at
// priority.Finishing when the Manifest's status changed (or it is gone) and
// every Manifest the Kyma lists has settled, so that the reconcile that sees
// the last module settle reports the Kyma's outcome; otherwise after the
// Kyma's Processing interval at priority.Background, so that modules settling
// one by one cost one Kyma reconcile, not one each. The Kyma requeues itself
// while it is Processing; the delayed add only shows progress sooner.
type manifestEvents struct {
	// settled says whether every Manifest of the Kyma has settled
	// (cachedSettled).
	settled func(ctx context.Context, kyma client.ObjectKey) bool
	// progress is how long a Kyma with modules still on their way waits
	// before an event reports that progress.
	progress time.Duration
}

var _ handler.EventHandler = manifestEvents{}

func (h manifestEvents) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	// Our own write: the reconcile that made it already counted it.
	h.enqueue(ctx, q, e.Object, false)
}

func (h manifestEvents) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldM, okOld := e.ObjectOld.(*v1beta2.Manifest)
	newM, okNew := e.ObjectNew.(*v1beta2.Manifest)
	reportable := !okOld || !okNew ||
		!equality.Semantic.DeepEqual(oldM.Status, newM.Status) ||
		oldM.DeletionTimestamp.IsZero() != newM.DeletionTimestamp.IsZero()
	h.enqueue(ctx, q, e.ObjectNew, reportable)
}

func (h manifestEvents) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	// A module removal finished, or someone deleted a Manifest the Kyma
	// must create again.
	h.enqueue(ctx, q, e.Object, true)
}

func (h manifestEvents) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, q, e.Object, false)
}

func (h manifestEvents) enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object, reportable bool) {
	if m, ok := obj.(*v1beta2.Manifest); ok && isKLMManifest(m) {
		return // not the Kyma's: a takeover releases it (kyma_takeover.go)
	}
	owner := metav1.GetControllerOf(obj)
	if owner == nil {
		return
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || (schema.GroupKind{Group: gv.Group, Kind: owner.Kind}) != kymaGroupKind {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}}
	if reportable && h.settled(ctx, req.NamespacedName) {
		priority.Add(q, priorityqueue.AddOpts{Priority: new(priority.Finishing)}, req)
		return
	}
	priority.Add(q, priorityqueue.AddOpts{After: h.progress, Priority: new(priority.Background)}, req)
}

// cachedSettled reads a Kyma and its Manifests from the cache, without
// copies, for modulesSettled. Its answer is a hint for the queue, never a
// decision: a wrong one costs a reconcile too many or a Processing interval
// of delay.
func cachedSettled(reader client.Reader) func(ctx context.Context, key client.ObjectKey) bool {
	return func(ctx context.Context, key client.ObjectKey) bool {
		kyma := &v1beta2.Kyma{}
		if err := reader.Get(ctx, key, kyma, client.UnsafeDisableDeepCopy); err != nil {
			return false
		}
		return modulesSettled(kyma, func(name string) (*v1beta2.Manifest, error) {
			m := &v1beta2.Manifest{}
			err := reader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, m, client.UnsafeDisableDeepCopy)
			return m, err
		})
	}
}

// modulesSettled says whether the Manifest of every module the Kyma lists
// in its status has settled (manifestSettled), or is gone when the module
// was being removed. A Kyma whose first reconcile has not written status
// has not settled.
func modulesSettled(kyma *v1beta2.Kyma, manifest func(name string) (*v1beta2.Manifest, error)) bool {
	if kyma.Status.State == "" {
		return false
	}
	for _, ms := range kyma.Status.Modules {
		if ms.State == v1beta2.StateUnmanaged {
			continue
		}
		m, err := manifest(ManifestName(kyma.Name, ms.Name))
		switch {
		case apierrors.IsNotFound(err):
			if ms.State != v1beta2.StateDeleting {
				return false // still to be created
			}
		case err != nil:
			return false
		case !manifestSettled(m):
			return false
		}
	}
	return true
}

// manifestSettled says whether the Manifest's controller has finished with
// its current generation, whatever the result.
func manifestSettled(m *v1beta2.Manifest) bool {
	if !m.DeletionTimestamp.IsZero() || m.Status.ObservedGeneration != m.Generation {
		return false
	}
	switch m.Status.State {
	case v1beta2.StateReady, v1beta2.StateWarning, v1beta2.StateError:
		return true
	default:
		return false
	}
}

// catalogEvents enqueues the Kymas a catalog change affects once the
// catalog has been quiet for catalogQuiet (at most catalogMaxWait after the
// first change), at priority.Background: a burst of changes, such as a
// fleet-wide upgrade of many modules, is one pass per Kyma, and it does not
// hold up Kymas that are installing.
type catalogEvents struct {
	kymas        func(ctx context.Context, obj client.Object) []reconcile.Request
	quiet, limit time.Duration

	mu sync.Mutex
	// pending are the Kymas to enqueue, in the order first collected.
	pending []reconcile.Request
	seen    map[reconcile.Request]bool
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	first   time.Time
	timer   *time.Timer
}

func newCatalogEvents(kymas func(ctx context.Context, obj client.Object) []reconcile.Request) *catalogEvents {
	return &catalogEvents{kymas: kymas, quiet: catalogQuiet, limit: catalogMaxWait}
}

var _ handler.EventHandler = &catalogEvents{}

func (h *catalogEvents) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.collect(q, h.kymas(ctx, e.Object))
}

func (h *catalogEvents) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	// Old and new: a module renamed or made mandatory concerns both sets.
	h.collect(q, append(h.kymas(ctx, e.ObjectOld), h.kymas(ctx, e.ObjectNew)...))
}

func (h *catalogEvents) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.collect(q, h.kymas(ctx, e.Object))
}

func (h *catalogEvents) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.collect(q, h.kymas(ctx, e.Object))
}

// collect adds requests to the pending set and (re)arms the flush.
func (h *catalogEvents) collect(q workqueue.TypedRateLimitingInterface[reconcile.Request], requests []reconcile.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queue = q
	if h.seen == nil {
		h.seen = map[reconcile.Request]bool{}
		h.first = time.Now()
	}
	for _, req := range requests {
		if !h.seen[req] {
			h.seen[req] = true
			h.pending = append(h.pending, req)
		}
	}
	wait := min(h.quiet, time.Until(h.first.Add(h.limit)))
	if h.timer == nil {
		h.timer = time.AfterFunc(wait, h.flush)
		return
	}
	h.timer.Reset(wait)
}

// flush enqueues what was collected.
func (h *catalogEvents) flush() {
	h.mu.Lock()
	pending, q := h.pending, h.queue
	h.pending, h.seen = nil, nil
	h.mu.Unlock()
	if len(pending) == 0 || q == nil {
		return
	}
	priority.Add(q, priorityqueue.AddOpts{Priority: new(priority.Background)}, pending...)
}

package reconciler

import (
	"context"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// Phases is what a controller brings to the skeleton: its finalizer, its
// pause rule, and two phases, one for an object being deleted and one for
// the rest. Each phase changes only the object's status in memory and says
// how it ended; Run records and patches.
type Phases[T client.Object] struct {
	// Controller names the controller in metrics.
	Controller string
	// Finalizer guards the object until Delete returns Done; empty means
	// the kind has none (Delete is then never called).
	Finalizer string
	// Gate, when set, admits the reconcile: a positive wait means "busy,
	// requeue after wait" (nothing is recorded), otherwise release is
	// called when the reconcile ends. Used for the per-runtime worker cap.
	Gate func(ctx context.Context, obj T) (release func(), wait time.Duration)
	// Deadline bounds the phases (not the final patch, so that the outcome
	// of a reconcile that ran out of time is still recorded); zero means
	// none.
	Deadline time.Duration
	// Paused reports whether the object must be left alone; a paused object
	// is still deleted when it is being deleted. OnPaused records that in
	// status. Both optional.
	Paused   func(obj T) bool
	OnPaused func(obj T)
	// PausedFor, when set, is how long until a paused object resumes by
	// itself (a hibernation schedule's wake); zero when only a change
	// resumes it. Optional.
	PausedFor func(obj T) time.Duration
	// Delete removes what the object put in place. Done lets it go.
	Delete func(ctx context.Context, obj T) Outcome
	// Announce, when set and returning true, has its outcome recorded and
	// patched before Reconcile runs: an object the controller never reported
	// on shows at once that work began, instead of after a first reconcile
	// that may connect to a runtime and fetch content first. Optional.
	Announce func(obj T) (Outcome, bool)
	// Reconcile brings the object to its desired state.
	Reconcile func(ctx context.Context, obj T) Outcome
	// Hold, when set and true, leaves the reconcile's outcome unrecorded
	// and the status unwritten; the outcome's requeue still applies. A
	// phase uses it for a status that can wait (a Kyma's progress while its
	// modules install). Optional.
	Hold func(obj T, o Outcome) bool
	// Record writes an outcome into the object's status (see Record).
	Record func(obj T, o Outcome)
	// Status returns the object's status, to tell whether it changed.
	Status func(obj T) any
	// Events reports the raw errors of failed outcomes; optional.
	Events *Events
}

// Run drives one reconcile of obj, which the caller has just read: gate and
// deadline; deletion (even when paused), else the finalizer, then pause;
// one phase; one status patch, made only when the status changed and with
// an optimistic lock, so that an object that changed meanwhile is
// reconciled again instead of overwritten.
func Run[T client.Object](ctx context.Context, c client.Client, obj T, p Phases[T]) (ctrl.Result, error) {
	if written.newer(obj.GetUID(), obj.GetResourceVersion()) {
		// A copy from before this process's own last status write: the
		// cache has it a moment later.
		return ctrl.Result{RequeueAfter: staleRequeue}, nil
	}
	if p.Gate != nil {
		release, wait := p.Gate(ctx, obj)
		if wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		defer release()
	}
	phaseCtx, cancel := ctx, context.CancelFunc(func() {})
	if p.Deadline > 0 {
		phaseCtx, cancel = context.WithTimeout(ctx, p.Deadline)
	}
	defer cancel()

	o := p.run(ctx, phaseCtx, c, obj)
	result, err := o.Result()
	metrics.CountRequeue(p.Controller, o.metricState(), err)
	return result, err
}

func (p Phases[T]) run(ctx, phaseCtx context.Context, c client.Client, obj T) Outcome {
	if !obj.GetDeletionTimestamp().IsZero() {
		if p.Finalizer == "" || !controllerutil.ContainsFinalizer(obj, p.Finalizer) || released.has(obj.GetUID(), p.Finalizer) {
			return Done()
		}
		base := obj.DeepCopyObject().(T)
		o := p.Delete(phaseCtx, obj)
		if o.Kind == KindDone {
			o = removeFinalizer(ctx, c, obj, p.Finalizer)
			if o.Kind == KindDone {
				released.add(obj.GetUID(), p.Finalizer)
			}
			return o
		}
		return p.finish(ctx, c, base, obj, o)
	}
	// The finalizer goes on before the pause is looked at (STYLE rule 1):
	// a paused object that is deleted is still cleaned up.
	if p.Finalizer != "" && !controllerutil.ContainsFinalizer(obj, p.Finalizer) {
		if o := addFinalizer(ctx, c, obj, p.Finalizer); o.Kind != KindDone {
			return o
		}
	}
	base := obj.DeepCopyObject().(T)
	if p.Paused != nil && p.Paused(obj) {
		if p.OnPaused != nil {
			p.OnPaused(obj)
		}
		if o := p.patchStatus(ctx, c, base, obj); o.Kind == KindConflict {
			return o
		}
		o := Outcome{Kind: KindPaused}
		if p.PausedFor != nil {
			o.After = p.PausedFor(obj)
		}
		return o
	}
	if p.Announce != nil {
		if o, ok := p.Announce(obj); ok {
			p.Record(obj, o)
			if patched := p.patchStatus(ctx, c, base, obj); patched.Kind != KindDone {
				return patched
			}
			// The patch answered with the stored object: it is the base of
			// the final patch, whose lock it now holds.
			base = obj.DeepCopyObject().(T)
		}
	}
	progress := &progress[T]{ctx: ctx, p: p, c: c, obj: obj, base: base}
	o := p.Reconcile(context.WithValue(phaseCtx, progressKey{}, progress.report), obj)
	return p.finish(ctx, c, progress.base, obj, o)
}

type progressKey struct{}

// progress patches the status of the object being reconciled while
// Reconcile runs; base moves with each patch, so that the final patch
// holds the lock of the last one.
type progress[T client.Object] struct {
	ctx  context.Context //nolint:containedctx // the reconcile's, for the patches made within it
	p    Phases[T]
	c    client.Client
	obj  T
	base T
}

func (r *progress[T]) report(o Outcome) bool {
	r.p.Record(r.obj, o)
	if equality.Semantic.DeepEqual(r.p.Status(r.base), r.p.Status(r.obj)) {
		return true
	}
	if err := r.c.Status().Patch(r.ctx, r.obj, client.MergeFromWithOptions(r.base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false
	}
	base, ok := r.obj.DeepCopyObject().(T)
	if ok {
		r.base = base
	}
	return ok
}

// ReportProgress records o in the status of the object that the
// Reconcile phase running under ctx works on, and patches it at once: for
// long work inside one reconcile (a storage migration), whose progress must
// show before the reconcile ends. The final outcome is recorded over it as
// usual. It is best effort: false when the patch failed (the final patch
// then finds the conflict) or ctx is no Reconcile phase's.
func ReportProgress(ctx context.Context, o Outcome) bool {
	report, ok := ctx.Value(progressKey{}).(func(Outcome) bool)
	return ok && report(o)
}

// finish records o in obj's status, reports its error as an event, and
// patches the status. A conflict on the patch wins over o: the object is
// looked at again with what changed.
func (p Phases[T]) finish(ctx context.Context, c client.Client, base, obj T, o Outcome) Outcome {
	if !o.Records() || (p.Hold != nil && p.Hold(obj, o)) {
		return o
	}
	p.Record(obj, o)
	p.Events.warnOutcome(obj, o)
	if patched := p.patchStatus(ctx, c, base, obj); patched.Kind == KindConflict || patched.Kind == KindRetry {
		return patched
	}
	return o
}

// patchStatus writes obj's status as a merge patch from base, only when it
// changed, with base's resourceVersion as an optimistic lock.
func (p Phases[T]) patchStatus(ctx context.Context, c client.Client, base, obj T) Outcome {
	if equality.Semantic.DeepEqual(p.Status(base), p.Status(obj)) {
		return Done()
	}
	err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return p.patchStatusAgain(ctx, c, base, obj)
	}
	if err == nil {
		written.add(obj.GetUID(), obj.GetResourceVersion())
	}
	return patched(err, Retry("StatusPatchFailed", "Writing the status failed", err))
}

// patchStatusAgain handles a conflict on the status patch. When someone else
// wrote the status meanwhile, it is left as they wrote it and the object is
// looked at again (Conflict). When only the metadata or spec changed (a
// deletion began, a label moved), the status this reconcile computed is
// still the truth about what it did in the runtime, its inventory above
// all: losing it would leave objects behind that no later reconcile knows
// of. So it is written onto the fresh object, again under a lock.
func (p Phases[T]) patchStatusAgain(ctx context.Context, c client.Client, base, obj T) Outcome {
	fresh, ok := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	if !ok {
		return Conflict(nil)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return patched(err, Conflict(err))
	}
	if fresh.GetResourceVersion() == base.GetResourceVersion() || !equality.Semantic.DeepEqual(p.Status(fresh), p.Status(base)) {
		return Conflict(nil)
	}
	freshBase, ok := fresh.DeepCopyObject().(T)
	if !ok {
		return Conflict(nil)
	}
	if err := copyStatus(obj, fresh); err != nil {
		return Conflict(err)
	}
	err := c.Status().Patch(ctx, fresh, client.MergeFromWithOptions(freshBase, client.MergeFromWithOptimisticLock{}))
	if err == nil {
		written.add(fresh.GetUID(), fresh.GetResourceVersion())
	}
	return patched(err, Retry("StatusPatchFailed", "Writing the status failed", err))
}

// copyStatus sets to's status to from's.
func copyStatus(from, to client.Object) error {
	src, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(from)
	if err != nil {
		return err
	}
	dst, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(to)
	if err != nil {
		return err
	}
	if status, found := src["status"]; found {
		dst["status"] = status
	} else {
		delete(dst, "status")
	}
	return k8sruntime.DefaultUnstructuredConverter.FromUnstructured(dst, to)
}

// addFinalizer and removeFinalizer patch metadata.finalizers with an
// optimistic lock: a plain merge patch of the list would drop a finalizer
// another controller added meanwhile.
//
// A new object is often given finalizers by several controllers at once
// (a Kyma by the Kyma and the watcher-agent controllers), so adding ours is
// refused when another got there first. It is then added again to the
// object as it is now, read once c has seen the other write, instead of
// after a requeue: a new Kyma's first status would wait a second for it.
func addFinalizer[T client.Object](ctx context.Context, c client.Client, obj T, finalizer string) Outcome {
	for attempt := 1; ; attempt++ {
		base := obj.DeepCopyObject().(T)
		controllerutil.AddFinalizer(obj, finalizer)
		o := patchFinalizers(ctx, c, base, obj)
		if o.Kind != KindConflict || attempt == finalizerAttempts || !reread(ctx, c, obj, base.GetResourceVersion()) {
			return o
		}
		if !obj.GetDeletionTimestamp().IsZero() {
			return Conflict(nil) // a deletion began: the next reconcile handles it
		}
		if controllerutil.ContainsFinalizer(obj, finalizer) {
			return Done()
		}
	}
}

// finalizerAttempts bounds the attempts to add a finalizer in one reconcile.
const finalizerAttempts = 3

// reread reads obj again into obj, waiting (briefly) until c returns a
// version newer than stale: a cached client sees another controller's
// write a moment after the API server refused ours because of it. It
// returns false when no newer version came.
func reread[T client.Object](ctx context.Context, c client.Client, obj T, stale string) bool {
	deadline := time.Now().Add(rereadWait)
	for {
		fresh, ok := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
		if !ok {
			return false
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			return false
		}
		if fresh.GetResourceVersion() != stale {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// rereadWait bounds how long reread waits for a cache to catch up.
const rereadWait = 500 * time.Millisecond

func removeFinalizer[T client.Object](ctx context.Context, c client.Client, obj T, finalizer string) Outcome {
	base := obj.DeepCopyObject().(T)
	controllerutil.RemoveFinalizer(obj, finalizer)
	return patchFinalizers(ctx, c, base, obj)
}

func patchFinalizers[T client.Object](ctx context.Context, c client.Client, base, obj T) Outcome {
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	return patched(err, Retry("FinalizerPatchFailed", "Updating the finalizers failed", err))
}

// patched is the outcome of a patch: done (also when the object is gone
// meanwhile), a quiet conflict, or failed.
func patched(err error, failed Outcome) Outcome {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return Done()
	case apierrors.IsConflict(err):
		return Conflict(err)
	default:
		return failed
	}
}

package manifest

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/awaits"
	"github.com/runtime-fleet/lifecycle-manager/internal/drift"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/priority"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// SetupOptions tune the Manifest controller.
type SetupOptions struct {
	MaxConcurrentReconciles int
	// BaseBackoff and MaxBackoff bound the retry delay after an error.
	BaseBackoff, MaxBackoff time.Duration
	// Reports carries the Manifests whose module resources changed in a
	// runtime, as the runtime watcher reported them; nil when the watcher
	// is off.
	Reports <-chan event.TypedGenericEvent[*v1beta2.Manifest]
}

// SetupWithManager registers the controller. Only spec, label, annotation
// and deletion changes start a reconcile: our own status writes do not.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts SetupOptions) error {
	r.events = reconciler.NewEvents(r.Recorder)
	r.wakes = priority.NewWakes()
	r.awaits = awaits.New(r.wakes.Wake)
	if err := mgr.Add(r.awaits); err != nil {
		return err
	}
	r.listings = drift.NewListings(listingTTLFor(r.Intervals))
	r.checks = newChecks(r, opts.MaxConcurrentReconciles)
	if err := mgr.Add(r.checks); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("manifest").
		For(&v1beta2.Manifest{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
			predicate.LabelChangedPredicate{},
		))).
		// A paused Kyma that resumes (or one that enters the selection) gets
		// its Manifests looked at at once, so drift made meanwhile is
		// corrected without waiting for the next interval.
		Watches(&v1beta2.Kyma{}, handler.EnqueueRequestsFromMapFunc(r.manifestsOfKyma),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// The Kyma lifecycle-manager's Manifest is released as soon as a
		// Manifest records taking it over (manifest_takeover.go).
		Watches(&v1beta2.Manifest{}, handler.EnqueueRequestsFromMapFunc(takenOverPredecessor),
			builder.WithPredicates(takeoverRecorded))
	b = b.WatchesRawSource(r.wakes.Source())
	b = b.WatchesRawSource(source.Channel(r.checks.found, &handler.TypedEnqueueRequestForObject[*v1beta2.Manifest]{}))
	if opts.Reports != nil {
		b = b.WatchesRawSource(source.Channel(opts.Reports, r.reported()))
	}
	return b.
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.BaseBackoff, opts.MaxBackoff),
		}).
		// A Manifest on its way (waiting for a runtime slot, Processing)
		// comes back ahead of Manifests not yet started, so that a
		// runtime's last module does not wait behind every other runtime's
		// first; a periodic drift check waits behind both.
		Complete(priority.Requeues{Reconciler: r, Periodic: r.Intervals.Error, InFlight: true})
}

func (r *Reconciler) manifestsOfKyma(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &v1beta2.ManifestList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), index.OfKyma(obj.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Manifests of a Kyma")
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return requests
}

// reported enqueues a Manifest whose module resources a runtime reported
// changed. The Kyma's shared listings may have been taken before the change:
// they are dropped first, so that the check it starts reads afresh.
func (r *Reconciler) reported() handler.TypedEventHandler[*v1beta2.Manifest, reconcile.Request] {
	return handler.TypedFuncs[*v1beta2.Manifest, reconcile.Request]{
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[*v1beta2.Manifest], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			key := client.ObjectKeyFromObject(e.Object)
			// The report names the Manifest only; its Kyma is in its labels.
			m := &v1beta2.Manifest{}
			if err := r.Get(ctx, key, m, client.UnsafeDisableDeepCopy); err == nil {
				r.listings.Forget(kymaName(m))
			}
			q.Add(reconcile.Request{NamespacedName: key})
		},
	}
}

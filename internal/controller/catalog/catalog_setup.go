package catalog

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// SetupWithManager registers the catalog sync. Any catalog change enqueues
// every Kyma once; the work queue folds a burst of changes into one sync per
// runtime.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	r.events = reconciler.NewEvents(mgr.GetEventRecorder("lifecycle-manager"))
	return ctrl.NewControllerManagedBy(mgr).
		Named("catalog").
		// A new Kyma, or new beta/internal labels, change what a runtime sees.
		For(&v1beta2.Kyma{}, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1beta2.ModuleTemplate{}, handler.EnqueueRequestsFromMapFunc(r.allKymas)).
		Watches(&v1beta2.ModuleReleaseMeta{}, handler.EnqueueRequestsFromMapFunc(r.allKymas)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}

func (r *Reconciler) allKymas(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &v1beta2.KymaList{}
	if err := r.List(ctx, list, client.InNamespace(r.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Kymas for a catalog change")
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return requests
}

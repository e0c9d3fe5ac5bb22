package manifest

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// SetupOptions tune the Manifest controller.
type SetupOptions struct {
	MaxConcurrentReconciles int
	// BaseBackoff and MaxBackoff bound the retry delay after an error.
	BaseBackoff, MaxBackoff time.Duration
}

// SetupWithManager registers the controller. Only spec, label, annotation
// and deletion changes start a reconcile: our own status writes do not.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts SetupOptions) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("manifest").
		For(&v1beta2.Manifest{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
			predicate.LabelChangedPredicate{},
		))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.BaseBackoff, opts.MaxBackoff),
		}).
		Complete(r)
}

package controller

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// SetupOptions tune the watcher controllers.
type SetupOptions struct {
	MaxConcurrentReconciles int
	BaseBackoff, MaxBackoff time.Duration
}

// SetupWithManager registers the AgentReconciler: a Kyma's runtime needs
// looking at when the Kyma appears, is deleted, or changes labels (runtime
// id, pause), when any Watcher changes, and when its kubeconfig Secret does.
func (r *AgentReconciler) SetupWithManager(mgr ctrl.Manager, opts SetupOptions) error {
	r.events = reconciler.NewEvents(r.Recorder)
	return ctrl.NewControllerManagedBy(mgr).
		Named("watcher-agent").
		For(&v1beta2.Kyma{}, builder.WithPredicates(kymaChanged())).
		Watches(&v1beta2.Watcher{}, handler.EnqueueRequestsFromMapFunc(r.allKymas)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(kymaOfSecret),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				_, ok := o.GetLabels()[v1beta2.KymaNameLabel]
				return ok && o.GetNamespace() == r.Options.Namespace
			}))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.BaseBackoff, opts.MaxBackoff),
		}).
		Complete(r)
}

// kymaChanged lets through what the agent depends on: labels, sync
// namespace (generation), deletion, and a lost finalizer (another writer's
// patch can drop it; it is put back).
func kymaChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				return true
			}
			if !e.ObjectNew.GetDeletionTimestamp().IsZero() {
				return true
			}
			if !controllerutil.ContainsFinalizer(e.ObjectNew, v1beta2.WatcherFinalizer) {
				return true
			}
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

func (r *AgentReconciler) allKymas(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &v1beta2.KymaList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.Options.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Kymas for a Watcher change")
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return requests
}

func kymaOfSecret(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetLabels()[v1beta2.KymaNameLabel]}}}
}

// SetupWithManager registers the StatusReconciler; without Events it
// reports through the manager's event recorder.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Events == nil {
		r.Events = reconciler.NewEvents(mgr.GetEventRecorder("lifecycle-manager"))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("watcher").
		For(&v1beta2.Watcher{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

package backup

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// SetupWithManager registers the controller: a RuntimeBackup is looked at
// when it is created or deleted, and when its Kyma is created, relabelled
// (another schedule may select it) or deleted. At most maxConcurrency
// backups run at once; the budget (backup_budget.go) decides how many up
// to that.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrency int) error {
	if r.Schedules == nil {
		return errNoSchedules
	}
	if r.Poll <= 0 {
		r.Poll = DefaultPoll
	}
	r.budget = newBudget(maxConcurrency)
	for _, s := range r.Schedules.Schedules {
		metrics.BackupScheduleInterval.WithLabelValues(s.Name).Set(s.Intervals().Longest.Seconds())
	}
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("backup").
		For(&v1beta2.RuntimeBackup{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1beta2.Kyma{}, sameName, builder.WithPredicates(predicate.Or[client.Object](
			predicate.LabelChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }},
		))).
		// As many workers as backups may run: the others' reconciles are
		// short (nothing due) or wait for the budget without a worker.
		WithOptions(controller.Options{MaxConcurrentReconciles: max(maxConcurrency, 1)}).
		Complete(r)
}

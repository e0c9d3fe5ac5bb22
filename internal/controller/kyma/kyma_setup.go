package kyma

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/priority"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// ModuleIndex indexes Kymas by the module names in their spec and status,
// so that a catalog change requeues exactly the Kymas it can affect, and a
// rollout reads only the Kymas of its module.
const ModuleIndex = "kyma.moduleNames"

// SetupOptions tune the Kyma controller.
type SetupOptions struct {
	// Namespace is where the catalog lives.
	Namespace               string
	MaxConcurrentReconciles int
	BaseBackoff, MaxBackoff time.Duration
	// Sources are further event sources, such as the runtime watcher's
	// channel of Kymas whose runtime reported a change.
	Sources []source.Source
}

// SetupWithManager registers the controller, its index and its watches.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts SetupOptions) error {
	if err := r.prepare(ctx, mgr, opts.Namespace); err != nil {
		return err
	}

	catalogChanges := newCatalogEvents(r.kymasForCatalog)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("kyma").
		For(&v1beta2.Kyma{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
		))).
		// Manifest status changes are what the Kyma aggregates; the queue's
		// order (kyma_queue.go) lets Kymas in flight finish first, and
		// makes a burst of catalog changes one pass per Kyma.
		Watches(&v1beta2.Manifest{}, manifestEvents{settled: cachedSettled(mgr.GetClient()), progress: r.Intervals.Processing}).
		Watches(&v1beta2.ModuleTemplate{}, catalogChanges).
		Watches(&v1beta2.ModuleReleaseMeta{}, catalogChanges).
		Watches(&v1beta2.ModuleRollout{}, handler.EnqueueRequestsFromMapFunc(r.kymasForRollout)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(kymaForSecret),
			builder.WithPredicates(predicate.NewPredicateFuncs(hasKymaNameLabel)))
	b = b.WatchesRawSource(r.wakes.Source())
	for _, src := range opts.Sources {
		b = b.WatchesRawSource(src)
	}
	return b.
		WithOptions(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.BaseBackoff, opts.MaxBackoff),
		}).
		// A Ready Kyma's periodic check waits behind everything else.
		Complete(priority.Requeues{Reconciler: r, Periodic: r.Intervals.Error})
}

// prepare makes the reconciler's own state and registers its index with
// mgr's cache: all Reconcile needs besides the controller, which tests that
// drive reconciles one by one leave out.
func (r *Reconciler) prepare(ctx context.Context, mgr ctrl.Manager, namespace string) error {
	r.events = reconciler.NewEvents(r.Recorder)
	r.wakes = priority.NewWakes()
	r.catalog = newCatalogSnapshot(mgr.GetClient(), namespace)
	r.ready = newReadyClock()
	if r.ProgressInterval <= 0 {
		r.ProgressInterval = DefaultProgressInterval
	}
	r.progress = newProgressWrites(r.ProgressInterval)
	r.runtimeSide = newRuntimeSide(mgr.GetClient())
	return IndexModules(ctx, mgr.GetFieldIndexer())
}

// IndexModules registers ModuleIndex with an indexer: the manager's cache,
// or another cache of Kymas (the rollout planner's, internal/controller/rollout).
func IndexModules(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1beta2.Kyma{}, ModuleIndex, indexModuleNames)
}

func indexModuleNames(obj client.Object) []string {
	kyma, ok := obj.(*v1beta2.Kyma)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var names []string
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for _, m := range kyma.Spec.Modules {
		add(m.Name)
	}
	for _, m := range kyma.Status.Modules {
		add(m.Name)
	}
	return names
}

// kymasForCatalog lists the Kymas a change of a ModuleTemplate or a
// ModuleReleaseMeta can affect, and drops the catalog snapshot.
func (r *Reconciler) kymasForCatalog(ctx context.Context, obj client.Object) []reconcile.Request {
	r.catalog.invalidate()
	switch o := obj.(type) {
	case *v1beta2.ModuleTemplate:
		return r.kymasForModule(ctx, resolve.ModuleName(o), o.Spec.Mandatory)
	case *v1beta2.ModuleReleaseMeta:
		return r.kymasForModule(ctx, o.Spec.ModuleName, o.Spec.Mandatory != nil)
	default:
		return nil
	}
}

// kymasForModule lists the Kymas a catalog change of a module can affect:
// those that list or have the module, or every Kyma for a mandatory module.
func (r *Reconciler) kymasForModule(ctx context.Context, module string, mandatory bool) []reconcile.Request {
	list := &v1beta2.KymaList{}
	opts := []client.ListOption{}
	if !mandatory {
		opts = append(opts, client.MatchingFields{ModuleIndex: module})
	}
	if err := r.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Kymas for a catalog change", "module", module)
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for _, k := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&k)})
	}
	return requests
}

func kymaForSecret(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[v1beta2.KymaNameLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

func hasKymaNameLabel(obj client.Object) bool {
	_, ok := obj.GetLabels()[v1beta2.KymaNameLabel]
	return ok
}

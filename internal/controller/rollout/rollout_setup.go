package rollout

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/intern"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// DefaultPoll is how often a rollout in flight is looked at when nothing
// it watches changes (a soak ending is scheduled exactly).
const DefaultPoll = 30 * time.Second

// NewFleetCache is a cache of every Kyma and Manifest in namespace, with the
// Kyma controller's index of Kymas by module, for a planner in a sharded
// operator: the manager's own cache holds its shard's part of the fleet
// only. It is started with mgr.
func NewFleetCache(ctx context.Context, mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	fleet, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		// As in the manager's cache: managedFields are large, and the
		// planner never reads them; repeated strings are kept once.
		DefaultTransform: intern.CacheTransform(intern.NewTable(intern.DefaultMaxEntries, intern.DefaultMaxLength)),
	})
	if err != nil {
		return nil, err
	}
	if err := kyma.IndexModules(ctx, fleet); err != nil {
		return nil, err
	}
	return fleet, mgr.Add(fleet)
}

// SetupWithManager registers the controller. It must come after the Kyma
// controller, whose index of Kymas by module it reads. fleet, when not nil,
// is where it reads Kymas and Manifests (NewFleetCache); else the manager's
// cache.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, fleet cache.Cache) error {
	if r.Poll <= 0 {
		r.Poll = DefaultPoll
	}
	manifests := source.Kind[client.Object](mgr.GetCache(), &v1beta2.Manifest{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfManifest))
	if fleet != nil {
		// Only the sharded kinds are read from the fleet's cache, and
		// their events come from it too: a reader lagging behind the cache
		// that sent the event would miss what the event was about (the
		// rollout itself, read NotFound, and never looked at again).
		r.Fleet = fleet
		manifests = source.Kind[client.Object](fleet, &v1beta2.Manifest{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfManifest))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("rollout").
		For(&v1beta2.ModuleRollout{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A Manifest of the module that changes (Ready, Error, a new
		// version) can end a wave or a halt.
		WatchesRawSource(manifests).
		Watches(&v1beta2.ModuleReleaseMeta{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			meta, _ := obj.(*v1beta2.ModuleReleaseMeta)
			if meta == nil {
				return nil
			}
			return r.rolloutsOf(ctx, meta.Spec.ModuleName)
		})).
		Watches(&v1beta2.ModuleTemplate{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			template, _ := obj.(*v1beta2.ModuleTemplate)
			if template == nil {
				return nil
			}
			return r.rolloutsOf(ctx, resolve.ModuleName(template))
		})).
		// One rollout at a time: each reads its module's whole fleet.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

func (r *Reconciler) rolloutsOfManifest(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.rolloutsOf(ctx, obj.GetLabels()[v1beta2.ModuleNameLabel])
}

// rolloutsOf lists the rollouts of a module.
func (r *Reconciler) rolloutsOf(ctx context.Context, module string) []reconcile.Request {
	if module == "" {
		return nil
	}
	list := &v1beta2.ModuleRolloutList{}
	if err := r.List(ctx, list, client.InNamespace(r.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ModuleRollouts", "module", module)
		return nil
	}
	var requests []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.ModuleName == module {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return requests
}

// Package takeover removes what the Kyma lifecycle-manager (KLM) left on
// the control plane's fleet-wide objects once this operator took over
// (docs/migrating-from-klm.md): KLM's finalizers on Watchers and on
// mandatory ModuleReleaseMetas. Kymas and Manifests are their own
// controllers' (kyma_takeover.go, manifest_takeover.go).
package takeover

import (
	"context"
	"fmt"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// Leftovers removes KLM's finalizer from each Watcher and
// ModuleReleaseMeta of the operator's namespace. Their duties are this
// operator's: its watcher controller configures the agents from the
// Watchers, and a mandatory module whose ModuleReleaseMeta is deleted is
// removed from every Kyma by the Kyma controller. KLM, stopped, would
// never remove them, and every deletion would wait for ever. Under any
// policy but off: the objects are the whole fleet's, not one Kyma's.
type Leftovers struct {
	client.Client
	Namespace string
}

// leftoverFinalizers are KLM's, per kind. KLM's Watcher finalizer has
// the same name as this operator's on Kymas; on a Watcher it is only ever
// KLM's.
var leftoverFinalizers = map[string]string{
	"Watcher":           v1beta2.WatcherFinalizer,
	"ModuleReleaseMeta": takeover.MandatoryModuleFinalizer,
}

// SetupWithManager registers one controller per kind; each sees only
// objects that carry KLM's finalizer.
func (r *Leftovers) SetupWithManager(mgr ctrl.Manager) error {
	for kind, obj := range map[string]client.Object{"Watcher": &v1beta2.Watcher{}, "ModuleReleaseMeta": &v1beta2.ModuleReleaseMeta{}} {
		finalizer := leftoverFinalizers[kind]
		carries := predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Namespace && slices.Contains(o.GetFinalizers(), finalizer)
		})
		newObject := func() client.Object { return obj.DeepCopyObject().(client.Object) }
		if err := ctrl.NewControllerManagedBy(mgr).
			Named("klm-leftovers-"+kind).
			For(obj, builder.WithPredicates(carries)).
			Complete(reconcilerFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
				return ctrl.Result{}, r.release(ctx, newObject(), req, finalizer)
			})); err != nil {
			return fmt.Errorf("setting up the KLM leftovers of %s: %w", kind, err)
		}
	}
	return nil
}

func (r *Leftovers) release(ctx context.Context, obj client.Object, req ctrl.Request, finalizer string) error {
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !slices.Contains(obj.GetFinalizers(), finalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == finalizer }))
	if err := r.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed the Kyma lifecycle-manager's finalizer", "finalizer", finalizer)
	return nil
}

type reconcilerFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

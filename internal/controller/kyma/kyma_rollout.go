package kyma

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// Rollouts (SPEC G1, internal/controller/rollout). A module's channel that
// has a ModuleRollout moves a Kyma's installed module to the channel's new
// version only when the rollout lets that Kyma move: it is in the wave in
// flight, or the rollout is Completed for that version. Every other Kyma
// keeps its Manifest as it is, at the installed version, and says so in
// its module status. A Kyma that does not have the module yet gets the
// channel's version at once: a rollout moves what is installed.

// rollouts reads the ModuleRollouts from the cache, once per reconcile.
func (r *Reconciler) rollouts(ctx context.Context, namespace string) ([]v1beta2.ModuleRollout, error) {
	list := &v1beta2.ModuleRolloutList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ModuleRollouts: %w", err)
	}
	return list.Items, nil
}

// holdForRollout says why the module must stay at the installed version,
// or "" when it may move to the version it resolved to.
func holdForRollout(kyma *v1beta2.Kyma, module *resolve.Module, existing *v1beta2.Manifest, rollouts []v1beta2.ModuleRollout) string {
	if existing == nil || module.Channel == "" || existing.Spec.Version == module.Version || !module.Installable() || module.Err != nil {
		return ""
	}
	for i := range rollouts {
		ro := &rollouts[i]
		if ro.Spec.ModuleName != module.Name || ro.Spec.Channel != module.Channel {
			continue
		}
		s := ro.Status
		if s.ToVersion == module.Version && (s.Phase == v1beta2.RolloutCompleted || slices.Contains(s.InFlight, kyma.Name)) {
			return ""
		}
		if s.ToVersion != module.Version {
			return fmt.Sprintf("Version %s waits for ModuleRollout %s to start its rollout; %s stays installed", module.Version, ro.Name, existing.Spec.Version)
		}
		// No wave number or counts: they change with every runtime that
		// finishes, and each change would rewrite the status of every Kyma
		// that waits (fleet-bench measured one extra write per Kyma). The
		// rollout's own status has them.
		return fmt.Sprintf("Version %s waits for its wave of ModuleRollout %s (%s); %s stays installed",
			module.Version, ro.Name, s.Phase, existing.Spec.Version)
	}
	return ""
}

// kymasForRollout requeues the Kymas a rollout's status lets move: the
// wave in flight, or every Kyma of the module once the rollout completed.
func (r *Reconciler) kymasForRollout(ctx context.Context, obj client.Object) []reconcile.Request {
	ro, ok := obj.(*v1beta2.ModuleRollout)
	if !ok {
		return nil
	}
	if ro.Status.Phase == v1beta2.RolloutCompleted {
		return r.kymasForModule(ctx, ro.Spec.ModuleName, false)
	}
	requests := make([]reconcile.Request, 0, len(ro.Status.InFlight))
	for _, name := range ro.Status.InFlight {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ro.Namespace, Name: name}})
	}
	return requests
}

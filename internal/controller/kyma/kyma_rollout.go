package kyma

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/Masterminds/semver/v3"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// Rollouts (SPEC G1, internal/controller/rollout). A module's channel (or
// mandatory version) that has a ModuleRollout moves a Kyma's installed
// module to the rollout's version only when the rollout lets that Kyma
// move: it is in the wave in flight, or the rollout is Completed for that
// version. Every other Kyma keeps its Manifest as it is, at the installed
// version, and says so in its module status. A Kyma that does not have the
// module yet gets the rollout's version at once: a rollout moves what is
// installed. A rollout that rolled back (spec.rollback) moves Kymas to the
// earlier version although the channel still points to the later one; a
// version goes back only to versions its template lists in rollbackTo.

// DefaultRolloutPlannerTimeout is how old a moving rollout's plan may be
// (status.plannedAt) before its Kymas say that no planner runs.
const DefaultRolloutPlannerTimeout = 2 * time.Minute

// rollouts reads the ModuleRollouts from the cache, once per reconcile.
func (r *Reconciler) rollouts(ctx context.Context, namespace string) ([]v1beta2.ModuleRollout, error) {
	list := &v1beta2.ModuleRolloutList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ModuleRollouts: %w", err)
	}
	return list.Items, nil
}

// governing is the rollout of the channel (or, for a mandatory module, the
// mandatory version) the module resolved through, or nil.
func governing(rollouts []v1beta2.ModuleRollout, module *resolve.Module) *v1beta2.ModuleRollout {
	if module.Channel == "" && !module.Mandatory {
		return nil
	}
	for i := range rollouts {
		ro := &rollouts[i]
		if ro.Spec.ModuleName == module.Name && ro.Spec.Channel == module.Channel {
			return ro
		}
	}
	return nil
}

// holdForRollout holds the module at the installed version until its
// rollout lets the Kyma move, and points it at the version the rollout
// moves to, which is earlier than the channel's after a rollback.
func holdForRollout(r *Reconciler, c holdCase) verdict {
	module, existing := c.module, c.existing
	ro := governing(c.rollouts, module)
	if ro == nil || (module.Template == nil && module.Err != nil) {
		return verdict{}
	}
	s := ro.Status
	downgrade := errors.Is(module.Err, resolve.ErrDowngrade)
	if module.Err != nil && !downgrade {
		return verdict{} // its error is reported; what is installed stays
	}
	if rolledBack(s, module.Version) {
		template, ok := c.catalog.Template(module.Name, s.ToVersion)
		if !ok {
			return verdict{refuse: fmt.Errorf("module %s: ModuleRollout %s rolled back to %s, which has no ModuleTemplate any more; %s stays installed",
				module.Name, ro.Name, s.ToVersion, installedOr(existing, "nothing"))}
		}
		module.Version, module.Template, module.Err, downgrade = s.ToVersion, template, nil, false
	}
	if existing == nil {
		if s.ToVersion == module.Version && s.Template == templateRef(module.Template) {
			module.Pinned = s.Content
		}
		return verdict{} // a fresh install takes the rollout's version at once
	}
	if existing.Spec.Version == module.Version {
		return verdict{}
	}
	if s.ToVersion != module.Version {
		return verdict{held: fmt.Sprintf("Version %s waits for ModuleRollout %s to start its rollout%s; %s stays installed",
			module.Version, ro.Name, r.plannerNote(s, c.now), existing.Spec.Version)}
	}
	if older(module.Version, existing.Spec.Version) {
		from, ok := c.catalog.Template(module.Name, existing.Spec.Version)
		if !ok || !resolve.MayRollBack(from.Spec.RollbackTo, module.Version) {
			return verdict{held: fmt.Sprintf("ModuleRollout %s moves to %s, but %s does not list it in its ModuleTemplate's spec.rollbackTo; %s stays installed",
				ro.Name, module.Version, existing.Spec.Version, existing.Spec.Version)}
		}
		module.Err, downgrade = nil, false
	}
	if s.Phase != v1beta2.RolloutCompleted && !slices.Contains(s.InFlight, c.kyma.Name) {
		// No wave number or counts: they change with every runtime that
		// finishes, and each change would rewrite the status of every Kyma
		// that waits (fleet-bench measured one extra write per Kyma). The
		// rollout's own status has them.
		return verdict{held: fmt.Sprintf("Version %s waits for its wave of ModuleRollout %s (%s%s); %s stays installed",
			module.Version, ro.Name, s.Phase, r.plannerNote(s, c.now), existing.Spec.Version)}
	}
	if downgrade {
		return verdict{} // unreachable: a downgrade was allowed above, or held
	}
	if s.Template == templateRef(module.Template) {
		module.Pinned = s.Content
	}
	return verdict{}
}

// rolledBack tells whether the rollout took the fleet back from version,
// which the channel still points to.
func rolledBack(s v1beta2.ModuleRolloutStatus, version string) bool {
	return s.Rollback != nil && s.Rollback.Refused == "" && s.Rollback.Of == version && s.ToVersion != version && s.ToVersion != ""
}

// plannerNote says, for a rollout still moving, that no planner has looked
// at it for longer than the planner timeout: no wave starts or ends until
// one does (the planner runs in the unsharded operator, or in shard 0).
func (r *Reconciler) plannerNote(s v1beta2.ModuleRolloutStatus, now time.Time) string {
	switch {
	case s.PlannedAt == nil:
		return ", which no planner has looked at yet"
	case s.Phase != v1beta2.RolloutProgressing && s.Phase != v1beta2.RolloutPaused:
		return ""
	}
	timeout := r.RolloutPlannerTimeout
	if timeout <= 0 {
		timeout = DefaultRolloutPlannerTimeout
	}
	if now.Sub(s.PlannedAt.Time) <= timeout {
		return ""
	}
	return fmt.Sprintf("; no planner has looked at it since %s", s.PlannedAt.UTC().Format(time.RFC3339))
}

// templateRef is how a rollout names a template revision.
func templateRef(t *v1beta2.ModuleTemplate) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s@%s", t.Namespace, t.Name, t.ResourceVersion)
}

func installedOr(existing *v1beta2.Manifest, none string) string {
	if existing == nil {
		return none
	}
	return existing.Spec.Version
}

// older tells whether version a is lower than b; versions that do not
// parse are not.
func older(a, b string) bool {
	va, errA := semver.StrictNewVersion(a)
	vb, errB := semver.StrictNewVersion(b)
	return errA == nil && errB == nil && va.LessThan(vb)
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

package kyma

import (
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// Holds. What the catalog resolves a module to is installed unless one of
// these policies says otherwise, asked in this order; the first that holds
// or refuses wins, and the module reports its reason. Work on the whole
// runtime is held before any of them, by the skeleton's pause
// (internal/pause: the skip-reconciliation label, --pause-selector, and
// hibernation schedules).
var moduleHolds = []moduleHold{
	{name: "trust", reason: "a template that would give its operator more than it declares, or runtime values it does not allow, is not installed (kyma_trust.go)", check: holdUntrusted},
	{name: "manual upgrade", reason: "a module that upgrades manually keeps its version until the runtime owner approves the new one or its deadline passes; the owner goes first (kyma_manual.go)", check: holdForManualUpgrade},
	{name: "rollout", reason: "a ModuleRollout moves installed modules in waves; a Kyma moves when its wave comes (kyma_rollout.go)", check: holdForRollout},
	{name: "maintenance window", reason: "a version that requires downtime is installed inside the runtime's window (kyma_maintenance.go)", check: holdForWindow},
}

// moduleHold is one policy that may keep a module at what is installed.
type moduleHold struct {
	// name and reason say what the policy is and why it exists.
	name, reason string
	check        func(r *Reconciler, c holdCase) verdict
}

// holdCase is what a hold decides on.
type holdCase struct {
	kyma        *v1beta2.Kyma
	module      *resolve.Module
	existing    *v1beta2.Manifest
	fromRuntime bool
	owner       ownerChoices
	rollouts    []v1beta2.ModuleRollout
	catalog     resolve.Catalog
	now         time.Time
}

// verdict is a hold's decision: refuse (the module's error; what is
// installed stays), hold (the reason, and until when when it ends by
// itself), or neither.
type verdict struct {
	refuse      error
	held        string
	until       time.Time
	maintenance bool
}

// applyHolds asks the holds in order and records the first decision on the
// module. It tells whether the module's Manifest may be written.
func (r *Reconciler) applyHolds(c holdCase) bool {
	// A manual upgrade's record stays while a hold before its own refuses.
	c.module.ManualUpgrade = storedManualUpgrade(c.kyma, c.module.Name)
	for _, h := range moduleHolds {
		v := h.check(r, c)
		switch {
		case v.refuse != nil:
			c.module.Err = v.refuse
			return false
		case v.held != "":
			c.module.Held, c.module.HeldUntil, c.module.Maintenance = v.held, v.until, v.maintenance
			c.module.Version = c.existing.Spec.Version
			return false
		}
	}
	return true
}

func holdUntrusted(_ *Reconciler, c holdCase) verdict {
	return verdict{refuse: refuseUntrusted(c.module, c.fromRuntime)}
}

package kyma

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

// Manual upgrades (issue 32, KLM epic #2678). A module that upgrades
// manually (its entry's upgrade: Manual, else its label group's policy,
// internal/upgradepolicy) keeps its installed version when the catalog
// offers a newer one, until the runtime owner approves exactly that
// version (spec.approvedUpgrades, in the runtime's Kyma or the control
// plane's) or its deadline passes: forceAfter after the version was first
// offered. The offer is recorded in the module's status
// (status.modules[].manualUpgrade) from the first time it is seen until
// the installed version reaches it, so that the deadline survives restarts
// and is not restarted by later reconciles; a newer version offered while
// one waits takes its place and keeps the first offer's time, as the
// owner has had notice since then. Fresh installs and downgrades
// (a rollout's rollback) never wait. After approval or the deadline the
// holds that follow (rollout wave, maintenance window) still apply.

// ReasonManualUpgradeForced is the reason of the event a Kyma gets when a
// module's manual upgrade is installed because its deadline passed.
const ReasonManualUpgradeForced = "ManualUpgradeForced"

// ownerChoices is what the runtime owner chose in the runtime's Kyma and
// the control plane's Kyma does not override: the upgrades approved, and
// the upgrade mode of each module the runtime's Kyma lists.
type ownerChoices struct {
	approved []v1beta2.UpgradeApproval
	upgrade  map[string]v1beta2.UpgradeMode
}

// ownerChoicesOf collects the approvals of both Kymas (runtimeKyma nil
// when the runtime could not be read: its approvals then wait for it) and
// the upgrade modes of the runtime's module entries.
func ownerChoicesOf(kyma, runtimeKyma *v1beta2.Kyma, runtimeModules []v1beta2.Module) ownerChoices {
	c := ownerChoices{approved: kyma.Spec.ApprovedUpgrades, upgrade: map[string]v1beta2.UpgradeMode{}}
	if runtimeKyma != nil {
		c.approved = append(append([]v1beta2.UpgradeApproval(nil), runtimeKyma.Spec.ApprovedUpgrades...), kyma.Spec.ApprovedUpgrades...)
	}
	for _, m := range runtimeModules {
		if m.Upgrade != "" {
			c.upgrade[m.Name] = m.Upgrade
		}
	}
	return c
}

// holdForManualUpgrade records the module's manual upgrade, if any, and
// holds the module while it waits for approval.
func holdForManualUpgrade(r *Reconciler, c holdCase) verdict {
	stored := storedManualUpgrade(c.kyma, c.module.Name)
	mu := r.manualUpgrade(c, stored)
	c.module.ManualUpgrade = mu
	switch {
	case mu == nil || mu.Approved || c.module.Err != nil:
		return verdict{}
	case mu.Forced:
		if stored == nil || !stored.Forced {
			r.events.Normal(c.kyma, ReasonManualUpgradeForced, fmt.Sprintf(
				"Module %s: version %s replaces %s without the runtime owner's approval, as soon as rollouts and maintenance windows let it: its deadline %s passed",
				c.module.Name, mu.Version, c.existing.Spec.Version, mu.ForceAt.UTC().Format(time.RFC3339)))
		}
		return verdict{}
	}
	held := fmt.Sprintf("Version %s waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until %s, when it is installed without it; %s stays installed",
		mu.Version, mu.ForceAt.UTC().Format(time.RFC3339), c.existing.Spec.Version)
	if other := approvedVersion(c.owner.approved, c.module.Name); other != "" {
		held += fmt.Sprintf(". The approval of %s does not count for %s", other, mu.Version)
	}
	return verdict{held: held, until: mu.ForceAt.Time}
}

// manualUpgrade is the module's manual upgrade as it stands now, from the
// one recorded (stored), or nil when none waits or was forced.
func (r *Reconciler) manualUpgrade(c holdCase, stored *v1beta2.ManualUpgradeStatus) *v1beta2.ManualUpgradeStatus {
	module, existing := c.module, c.existing
	switch {
	case module.Err != nil || module.Template == nil:
		return stored // nothing to decide on: what was recorded stays
	case existing == nil, existing.Spec.Version == module.Version, older(module.Version, existing.Spec.Version), !module.Spec.Managed:
		return nil // a fresh install, the version reached, a downgrade, or a module let go
	}
	if ro := governing(c.rollouts, module); ro != nil && rolledBack(ro.Status, module.Version) {
		return nil // the rollout takes the fleet back from this version
	}
	mode, forceAfter := r.upgradeMode(c)
	if mode != v1beta2.UpgradeManual {
		return nil
	}
	mu := &v1beta2.ManualUpgradeStatus{OfferedAt: metav1.NewTime(c.now.UTC().Truncate(time.Second))}
	if stored != nil {
		mu.OfferedAt = stored.OfferedAt
	}
	mu.Version = module.Version
	mu.ForceAt = metav1.NewTime(mu.OfferedAt.Add(forceAfter))
	mu.Approved = approves(c.owner.approved, module.Name, module.Version)
	mu.Forced = !mu.Approved && !c.now.Before(mu.ForceAt.Time)
	return mu
}

// upgradeMode is how the module upgrades, and the deadline of a manual
// upgrade: the control plane's entry's mode, else the runtime owner's,
// else the label group's policy (Automatic without one).
func (r *Reconciler) upgradeMode(c holdCase) (v1beta2.UpgradeMode, time.Duration) {
	groupMode, forceAfter := r.UpgradePolicy.For(c.kyma.Labels)
	switch {
	case c.module.Spec.Upgrade != "":
		return c.module.Spec.Upgrade, forceAfter
	case c.owner.upgrade[c.module.Name] != "":
		return c.owner.upgrade[c.module.Name], forceAfter
	}
	return groupMode, forceAfter
}

// UpgradeModeOf is how a Kyma's module upgrades, as the Kyma's spec and
// the runtime module list in its status say (for the rollout planner,
// which does not read runtimes): the control plane's entry's mode, else
// the runtime owner's entry's, else the label group's policy.
func UpgradeModeOf(kyma *v1beta2.Kyma, module string, policy *upgradepolicy.Policy) v1beta2.UpgradeMode {
	for _, list := range [][]v1beta2.Module{kyma.Spec.Modules, kyma.Status.RuntimeModules} {
		for _, m := range list {
			if m.Name == module && m.Upgrade != "" {
				return m.Upgrade
			}
		}
	}
	mode, _ := policy.For(kyma.Labels)
	return mode
}

// Approves tells whether an approval names the module with exactly this
// version.
func Approves(approved []v1beta2.UpgradeApproval, module, version string) bool {
	return approves(approved, module, version)
}

// approves tells whether an approval names the module with exactly this
// version.
func approves(approved []v1beta2.UpgradeApproval, module, version string) bool {
	for _, a := range approved {
		if a.Module == module && a.Version == version {
			return true
		}
	}
	return false
}

// approvedVersion is a version approved for the module, or "".
func approvedVersion(approved []v1beta2.UpgradeApproval, module string) string {
	for _, a := range approved {
		if a.Module == module {
			return a.Version
		}
	}
	return ""
}

// storedManualUpgrade is the manual upgrade the Kyma's stored status
// records for the module.
func storedManualUpgrade(kyma *v1beta2.Kyma, module string) *v1beta2.ManualUpgradeStatus {
	for i := range kyma.Status.Modules {
		if ms := &kyma.Status.Modules[i]; ms.Name == module && ms.ManualUpgrade != nil {
			return ms.ManualUpgrade.DeepCopy()
		}
	}
	return nil
}

// manualUpgrades are the modules' manual upgrades by module.
func manualUpgrades(modules []v1beta2.ModuleStatus) map[string]v1beta2.ManualUpgradeStatus {
	var out map[string]v1beta2.ManualUpgradeStatus
	for _, ms := range modules {
		if ms.ManualUpgrade != nil {
			if out == nil {
				out = map[string]v1beta2.ManualUpgradeStatus{}
			}
			out[ms.Name] = *ms.ManualUpgrade
		}
	}
	return out
}

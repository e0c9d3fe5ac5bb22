package rollout

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

// shopMove is a runtime's move of shop from 1.0.0 to 2.0.0.
var shopMove = toward{module: "shop", from: "1.0.0", to: "2.0.0"}

// manualKyma is a Kyma whose status records a manual upgrade of shop to
// 2.0.0, due at forceAt.
func manualKyma(forceAt time.Time, approved, forced bool) *v1beta2.Kyma {
	k := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "kyma-00"}}
	k.Status.Modules = []v1beta2.ModuleStatus{
		{Name: "cart", ManualUpgrade: &v1beta2.ManualUpgradeStatus{Version: "9.0.0", ForceAt: metav1.NewTime(forceAt)}},
		{Name: "shop", ManualUpgrade: &v1beta2.ManualUpgradeStatus{Version: "2.0.0", ForceAt: metav1.NewTime(forceAt), Approved: approved, Forced: forced}},
	}
	return k
}

// A runtime whose owner has not approved the rollout's module yet, before
// its deadline, cannot move now, and says why; approved, forced, past the
// deadline, or another module's wait, it can.
func TestBlockedWaitsForTheRuntimeOwner(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Hour)
	r := &Reconciler{}
	g.Expect(r.blocked(manualKyma(deadline, false, false), shopMove, nil, now)).To(Equal("waiting for the runtime owner's approval of 2.0.0 until 2026-12-03T11:00:00Z"))
	g.Expect(r.blocked(manualKyma(deadline, true, false), shopMove, nil, now)).To(BeEmpty(), "approved")
	g.Expect(r.blocked(manualKyma(deadline, false, true), shopMove, nil, now)).To(BeEmpty(), "forced")
	g.Expect(r.blocked(manualKyma(now, false, false), shopMove, nil, now)).To(BeEmpty(), "the deadline is now: the Kyma controller installs it")
	g.Expect(r.blocked(manualKyma(deadline, false, false), toward{module: "cart", from: "1.0.0", to: "2.0.0"}, nil, now)).To(Equal("waiting for the runtime owner's approval of 9.0.0 until 2026-12-03T11:00:00Z"))
	g.Expect(r.blocked(manualKyma(deadline, false, false), toward{module: "blog", from: "1.0.0", to: "2.0.0"}, nil, now)).To(BeEmpty(), "no manual upgrade of this module")

	// The channel just moved: the Kyma controller has not recorded the
	// offer yet, but the module upgrades manually (its entry, the runtime
	// owner's entry, or the label group's policy), and nothing approves
	// 2.0.0 in the control plane: it waits too, so that no wave takes it.
	fresh := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "kyma-00", Labels: map[string]string{"tier": "regulated"}}}
	fresh.Status.RuntimeModules = []v1beta2.Module{{Name: "shop", Upgrade: v1beta2.UpgradeManual}}
	g.Expect(r.blocked(fresh, shopMove, nil, now)).To(Equal("waiting for the runtime owner's approval of 2.0.0"))
	g.Expect(r.blocked(fresh, toward{module: "shop", from: "3.0.0", to: "2.0.0"}, nil, now)).To(BeEmpty(), "a rollback does not wait")
	g.Expect(r.blocked(fresh, toward{module: "shop", from: "", to: "2.0.0"}, nil, now)).To(BeEmpty(), "a fresh install does not wait")
	fresh.Spec.Modules = []v1beta2.Module{{Name: "shop", Upgrade: v1beta2.UpgradeAutomatic}}
	g.Expect(r.blocked(fresh, shopMove, nil, now)).To(BeEmpty(), "the control plane's entry wins")
	fresh.Spec.Modules = nil
	fresh.Spec.ApprovedUpgrades = []v1beta2.UpgradeApproval{{Module: "shop", Version: "2.0.0"}}
	g.Expect(r.blocked(fresh, shopMove, nil, now)).To(BeEmpty(), "approved in the control plane")
	fresh.Spec.ApprovedUpgrades = nil
	fresh.Status.RuntimeModules = nil
	g.Expect(r.blocked(fresh, shopMove, nil, now)).To(BeEmpty(), "automatic")
	regulated, err := upgradepolicy.Parse([]byte("policies:\n  - name: regulated\n    selector: {matchLabels: {tier: regulated}}\n    upgrade: Manual\n    forceAfter: 1h\n"))
	g.Expect(err).NotTo(HaveOccurred())
	r.UpgradePolicy = regulated
	g.Expect(r.blocked(fresh, shopMove, nil, now)).To(Equal("waiting for the runtime owner's approval of 2.0.0"), "the label group's policy")

	paused := manualKyma(deadline, false, false)
	paused.Labels = map[string]string{v1beta2.SkipReconciliationLabel: "true"}
	g.Expect(r.blocked(paused, shopMove, nil, now)).To(HavePrefix("paused"), "a paused runtime does nothing at all: that comes first")
}

// The wave counts a runtime that waits for its owner as pending, with the
// reason: not failed, not in flight, even past the progress deadline; once
// approved, the next wave takes it.
func TestPlanCountsRuntimesWaitingForTheirOwnerAsPending(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(4)
	spec := policy()
	spec.Canary = nil
	spec.SoakTime = metav1.Duration{}
	spec.ProgressDeadline = metav1.Duration{Duration: 10 * time.Minute}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r := &Reconciler{}
	waiting := r.blocked(manualKyma(now.Add(720*time.Hour), false, false), shopMove, nil, now)
	status, _, _ := Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	f.runtimes[2].Blocked = waiting

	status, _, _ = Plan(spec, status, v2, f.runtimes, now)
	g.Expect(status.InFlight).To(ConsistOf("kyma-00", "kyma-01", "kyma-03"))
	g.Expect(status.Runtimes.Pending).To(Equal([]v1beta2.RolloutRuntime{{Kyma: "kyma-02", Reason: "waiting for the runtime owner's approval of 2.0.0 until 2027-01-02T10:00:00Z"}}))
	f.move([]string{"kyma-00", "kyma-01", "kyma-03"}, v1beta2.StateReady)

	status, _, _ = Plan(spec, status, v2, f.runtimes, now.Add(11*time.Minute))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing))
	g.Expect(status.Failed).To(BeEmpty())
	g.Expect(status.InFlight).To(BeEmpty())
	g.Expect(status.Pending).To(Equal(int32(1)))
	g.Expect(status.Runtimes.Pending).To(ConsistOf(HaveField("Reason", waiting)))
	o := outcomeOf(&v1beta2.ModuleRollout{Spec: spec, Status: status}, time.Minute, now.Add(11*time.Minute))
	g.Expect(o.Message).To(ContainSubstring("waiting for runtimes that cannot move now, such as kyma-02 (waiting for the runtime owner's approval of 2.0.0"))

	f.runtimes[2].Blocked = "" // approved
	status, _, _ = Plan(spec, status, v2, f.runtimes, now.Add(12*time.Minute))
	g.Expect(status.InFlight).To(ConsistOf("kyma-02"))
}

package kyma

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

var manualNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// manualCase is a Kyma with shop installed at installed ("" for none) and
// the catalog pointing to 2.0.0, the module entry's upgrade mode set to
// mode, and the given stored manual upgrade.
func manualCase(installed string, mode v1beta2.UpgradeMode, stored *v1beta2.ManualUpgradeStatus) holdCase {
	template := rolloutTemplate("2.0.0")
	module := &resolve.Module{Name: "shop", Channel: "regular", Version: "2.0.0", Template: &template,
		Spec: v1beta2.Module{Name: "shop", Managed: true, Upgrade: mode}}
	var existing *v1beta2.Manifest
	if installed != "" {
		existing = &v1beta2.Manifest{Spec: v1beta2.ManifestSpec{Version: installed}}
	}
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k1", Labels: map[string]string{"tier": "regulated"}}}
	kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "shop", ManualUpgrade: stored}}
	return holdCase{kyma: kyma, module: module, existing: existing, now: manualNow}
}

func offered(version string, at time.Time, forceAfter time.Duration) *v1beta2.ManualUpgradeStatus {
	return &v1beta2.ManualUpgradeStatus{Version: version, OfferedAt: metav1.NewTime(at), ForceAt: metav1.NewTime(at.Add(forceAfter))}
}

// The verdict table of the manual upgrade hold: what waits, what is
// recorded, and what the module says.
func TestHoldForManualUpgrade(t *testing.T) {
	const month = upgradepolicy.DefaultForceAfter
	regulated, err := upgradepolicy.Parse([]byte("policies:\n  - name: regulated\n    selector: {matchLabels: {tier: regulated}}\n    upgrade: Manual\n    forceAfter: 168h\n"))
	if err != nil {
		t.Fatal(err)
	}
	approve := func(version string) ownerChoices {
		return ownerChoices{approved: []v1beta2.UpgradeApproval{{Module: "shop", Version: version}}}
	}
	for name, tc := range map[string]struct {
		installed string
		mode      v1beta2.UpgradeMode
		stored    *v1beta2.ManualUpgradeStatus
		owner     ownerChoices
		policy    *upgradepolicy.Policy
		err       error
		want      *v1beta2.ManualUpgradeStatus
		held      string
	}{
		"automatic by default": {installed: "1.0.0"},
		"automatic set":        {installed: "1.0.0", mode: v1beta2.UpgradeAutomatic},
		"manual waits": {installed: "1.0.0", mode: v1beta2.UpgradeManual,
			want: offered("2.0.0", manualNow, month),
			held: "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-31T10:00:00Z, when it is installed without it; 1.0.0 stays installed"},
		"manual approved": {installed: "1.0.0", mode: v1beta2.UpgradeManual, owner: approve("2.0.0"),
			want: func() *v1beta2.ManualUpgradeStatus {
				mu := offered("2.0.0", manualNow, month)
				mu.Approved = true
				return mu
			}()},
		"another version approved": {installed: "1.0.0", mode: v1beta2.UpgradeManual, owner: approve("1.5.0"),
			want: offered("2.0.0", manualNow, month),
			held: "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-31T10:00:00Z, when it is installed without it; 1.0.0 stays installed. The approval of 1.5.0 does not count for 2.0.0"},
		"another module approved": {installed: "1.0.0", mode: v1beta2.UpgradeManual,
			owner: ownerChoices{approved: []v1beta2.UpgradeApproval{{Module: "cart", Version: "2.0.0"}}},
			want:  offered("2.0.0", manualNow, month),
			held:  "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-31T10:00:00Z, when it is installed without it; 1.0.0 stays installed"},
		"deadline not yet passed": {installed: "1.0.0", mode: v1beta2.UpgradeManual, stored: offered("2.0.0", manualNow.Add(-month+time.Second), month),
			want: offered("2.0.0", manualNow.Add(-month+time.Second), month),
			held: "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-01T10:00:01Z, when it is installed without it; 1.0.0 stays installed"},
		"deadline passed": {installed: "1.0.0", mode: v1beta2.UpgradeManual, stored: offered("2.0.0", manualNow.Add(-month), month),
			want: func() *v1beta2.ManualUpgradeStatus {
				mu := offered("2.0.0", manualNow.Add(-month), month)
				mu.Forced = true
				return mu
			}()},
		"a newer version keeps the first offer's time": {installed: "1.0.0", mode: v1beta2.UpgradeManual, stored: offered("1.5.0", manualNow.Add(-time.Hour), month),
			want: offered("2.0.0", manualNow.Add(-time.Hour), month),
			held: "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-31T09:00:00Z, when it is installed without it; 1.0.0 stays installed"},
		"fresh install":              {mode: v1beta2.UpgradeManual},
		"version reached":            {installed: "2.0.0", mode: v1beta2.UpgradeManual, stored: offered("2.0.0", manualNow.Add(-time.Hour), month)},
		"downgrade":                  {installed: "3.0.0", mode: v1beta2.UpgradeManual},
		"switched back to automatic": {installed: "1.0.0", mode: v1beta2.UpgradeAutomatic, stored: offered("2.0.0", manualNow.Add(-time.Hour), month)},
		"an error keeps the record": {installed: "1.0.0", mode: v1beta2.UpgradeManual, stored: offered("2.0.0", manualNow.Add(-time.Hour), month),
			err: resolve.ErrNotVisible, want: offered("2.0.0", manualNow.Add(-time.Hour), month)},
		"group default": {installed: "1.0.0", policy: regulated,
			want: offered("2.0.0", manualNow, 168*time.Hour),
			held: "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-08T10:00:00Z, when it is installed without it; 1.0.0 stays installed"},
		"entry wins over the group": {installed: "1.0.0", mode: v1beta2.UpgradeAutomatic, policy: regulated},
		"owner's entry": {installed: "1.0.0", owner: ownerChoices{upgrade: map[string]v1beta2.UpgradeMode{"shop": v1beta2.UpgradeManual}},
			want: offered("2.0.0", manualNow, month),
			held: "Version 2.0.0 waits for the runtime owner's approval (spec.approvedUpgrades in the runtime's Kyma) until 2026-12-31T10:00:00Z, when it is installed without it; 1.0.0 stays installed"},
		"control plane's entry wins over the owner's": {installed: "1.0.0", mode: v1beta2.UpgradeAutomatic,
			owner: ownerChoices{upgrade: map[string]v1beta2.UpgradeMode{"shop": v1beta2.UpgradeManual}}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := manualCase(tc.installed, tc.mode, tc.stored)
			c.owner = tc.owner
			c.module.Err = tc.err
			r := &Reconciler{UpgradePolicy: tc.policy}
			v := holdForManualUpgrade(r, c)
			g.Expect(v.held).To(Equal(tc.held))
			g.Expect(c.module.ManualUpgrade).To(Equal(tc.want))
			if tc.held != "" {
				g.Expect(v.until).To(Equal(tc.want.ForceAt.Time), "the Kyma wakes at the deadline")
			} else {
				g.Expect(v.until.IsZero()).To(BeTrue())
			}
		})
	}
}

// The manual hold comes after trust and before the rollout: a module that
// waits for its owner keeps the installed version and says why, whatever
// its rollout would say; a refusal before it keeps the recorded offer.
func TestManualUpgradeHoldsBeforeTheRollout(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{}
	c := manualCase("1.0.0", v1beta2.UpgradeManual, nil)
	c.rollouts = []v1beta2.ModuleRollout{{ObjectMeta: metav1.ObjectMeta{Name: "shop-regular"},
		Spec:   v1beta2.ModuleRolloutSpec{ModuleName: "shop", Channel: "regular"},
		Status: v1beta2.ModuleRolloutStatus{FromVersion: "1.0.0", ToVersion: "2.0.0", Phase: v1beta2.RolloutProgressing}}}
	g.Expect(r.applyHolds(c)).To(BeFalse())
	g.Expect(c.module.Version).To(Equal("1.0.0"))
	g.Expect(c.module.Held).To(HavePrefix("Version 2.0.0 waits for the runtime owner's approval"))
	g.Expect(c.module.HeldUntil).To(Equal(manualNow.Add(upgradepolicy.DefaultForceAfter)))

	// Approved: the rollout's wave decides now.
	c = manualCase("1.0.0", v1beta2.UpgradeManual, nil)
	c.rollouts = []v1beta2.ModuleRollout{{ObjectMeta: metav1.ObjectMeta{Name: "shop-regular"},
		Spec:   v1beta2.ModuleRolloutSpec{ModuleName: "shop", Channel: "regular"},
		Status: v1beta2.ModuleRolloutStatus{FromVersion: "1.0.0", ToVersion: "2.0.0", Phase: v1beta2.RolloutProgressing}}}
	c.owner.approved = []v1beta2.UpgradeApproval{{Module: "shop", Version: "2.0.0"}}
	g.Expect(r.applyHolds(c)).To(BeFalse())
	g.Expect(c.module.Held).To(HavePrefix("Version 2.0.0 waits for its wave of ModuleRollout shop-regular"))
	g.Expect(c.module.ManualUpgrade.Approved).To(BeTrue())

	// A rollback is never held for the owner.
	c = manualCase("2.0.0", v1beta2.UpgradeManual, nil)
	c.module.Version = "3.0.0"
	c.rollouts = []v1beta2.ModuleRollout{{ObjectMeta: metav1.ObjectMeta{Name: "shop-regular"},
		Spec: v1beta2.ModuleRolloutSpec{ModuleName: "shop", Channel: "regular"},
		Status: v1beta2.ModuleRolloutStatus{FromVersion: "3.0.0", ToVersion: "2.0.0", Phase: v1beta2.RolloutProgressing,
			Rollback: &v1beta2.RolloutRollback{By: "alice", Of: "3.0.0"}}}}
	g.Expect(holdForManualUpgrade(r, c)).To(Equal(verdict{}))
	g.Expect(c.module.ManualUpgrade).To(BeNil())

	// Trust refuses first: the offer recorded stays, with its time.
	stored := offered("2.0.0", manualNow.Add(-time.Hour), upgradepolicy.DefaultForceAfter)
	c = manualCase("1.0.0", v1beta2.UpgradeManual, stored)
	c.module.Template.Spec.Target = v1beta2.TargetControlPlane
	g.Expect(r.applyHolds(c)).To(BeFalse())
	g.Expect(c.module.Err).To(HaveOccurred())
	g.Expect(c.module.ManualUpgrade).To(Equal(stored))
}

// Approvals count from either Kyma; the runtime's count only once it was
// read, and its module entries' upgrade modes are the owner's.
func TestOwnerChoices(t *testing.T) {
	g := NewWithT(t)
	kcp := &v1beta2.Kyma{Spec: v1beta2.KymaSpec{ApprovedUpgrades: []v1beta2.UpgradeApproval{{Module: "shop", Version: "2.0.0"}}}}
	rt := &v1beta2.Kyma{Spec: v1beta2.KymaSpec{ApprovedUpgrades: []v1beta2.UpgradeApproval{{Module: "shop", Version: "1.9.0"}, {Module: "cart", Version: "1.0.0"}}}}
	c := ownerChoicesOf(kcp, rt, []v1beta2.Module{{Name: "cart", Upgrade: v1beta2.UpgradeManual}, {Name: "shop"}})
	g.Expect(approves(c.approved, "shop", "2.0.0")).To(BeTrue(), "an SRE approves in the control plane")
	g.Expect(approves(c.approved, "shop", "1.9.0")).To(BeTrue())
	g.Expect(approves(c.approved, "cart", "1.0.0")).To(BeTrue())
	g.Expect(approves(c.approved, "cart", "1.0.1")).To(BeFalse())
	g.Expect(c.upgrade).To(Equal(map[string]v1beta2.UpgradeMode{"cart": v1beta2.UpgradeManual}))

	c = ownerChoicesOf(kcp, nil, nil)
	g.Expect(approves(c.approved, "cart", "1.0.0")).To(BeFalse(), "the runtime's approvals wait for the runtime")
}

package kyma

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

func rolloutTemplate(version string, rollbackTo ...string) v1beta2.ModuleTemplate {
	return v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-" + version, Namespace: "kcp-system", ResourceVersion: "7"},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: "shop", Version: version, RollbackTo: rollbackTo},
	}
}

// rolloutCase is a Kyma with shop 2.0.0 installed on channel regular, which
// points to 2.0.0, under a rollout that rolled back to 1.0.0.
func rolloutCase(installed string, status v1beta2.ModuleRolloutStatus, templates ...v1beta2.ModuleTemplate) (holdCase, *resolve.Module) {
	catalog := resolve.NewCatalog(templates, nil)
	channelTemplate, _ := catalog.Template("shop", "2.0.0")
	module := &resolve.Module{Name: "shop", Channel: "regular", Version: "2.0.0", Template: channelTemplate, Spec: v1beta2.Module{Name: "shop", Managed: true}}
	var existing *v1beta2.Manifest
	if installed != "" {
		existing = &v1beta2.Manifest{Spec: v1beta2.ManifestSpec{Version: installed}}
	}
	ro := v1beta2.ModuleRollout{ObjectMeta: metav1.ObjectMeta{Name: "shop-regular"}, Spec: v1beta2.ModuleRolloutSpec{ModuleName: "shop", Channel: "regular"}, Status: status}
	return holdCase{kyma: &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k1"}}, module: module, existing: existing,
		rollouts: []v1beta2.ModuleRollout{ro}, catalog: catalog, now: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}, module
}

func rolledBackTo(inFlight ...string) v1beta2.ModuleRolloutStatus {
	return v1beta2.ModuleRolloutStatus{
		FromVersion: "2.0.0", ToVersion: "1.0.0", Template: "kcp-system/shop-1.0.0@7", Phase: v1beta2.RolloutProgressing, InFlight: inFlight,
		Rollback:  &v1beta2.RolloutRollback{By: "alice", Of: "2.0.0"},
		Content:   []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://r.test/shop@sha256:1111"}},
		PlannedAt: &metav1.Time{Time: time.Date(2026, 12, 3, 9, 59, 30, 0, time.UTC)},
	}
}

// A Kyma admitted to a rollback's wave moves back to the earlier version,
// with the content the rollout pinned; one not admitted stays and says
// why; a fresh install takes the earlier version.
func TestHoldForRolloutMovesBackWhenAdmitted(t *testing.T) {
	g := NewWithT(t)
	templates := []v1beta2.ModuleTemplate{rolloutTemplate("1.0.0"), rolloutTemplate("2.0.0", "1.0.x")}
	r := &Reconciler{}

	c, module := rolloutCase("2.0.0", rolledBackTo("k1"), templates...)
	g.Expect(holdForRollout(r, c)).To(Equal(verdict{}))
	g.Expect(module.Version).To(Equal("1.0.0"))
	g.Expect(module.Template.Spec.Version).To(Equal("1.0.0"))
	g.Expect(module.Pinned).To(Equal(c.rollouts[0].Status.Content))

	c, _ = rolloutCase("2.0.0", rolledBackTo("k9"), templates...)
	v := holdForRollout(r, c)
	g.Expect(v.held).To(Equal("Version 1.0.0 waits for its wave of ModuleRollout shop-regular (Progressing); 2.0.0 stays installed"))

	c, module = rolloutCase("", rolledBackTo(), templates...)
	g.Expect(holdForRollout(r, c)).To(Equal(verdict{}))
	g.Expect(module.Version).To(Equal("1.0.0"), "a fresh install gets the version rolled back to")
}

// Whatever the rollout's status says, a version is never written back to
// one its template does not list in rollbackTo.
func TestHoldForRolloutNeverDowngradesUndeclared(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{}
	c, module := rolloutCase("2.0.0", rolledBackTo("k1"), rolloutTemplate("1.0.0"), rolloutTemplate("2.0.0"))
	v := holdForRollout(r, c)
	g.Expect(v.held).To(ContainSubstring("2.0.0 does not list it in its ModuleTemplate's spec.rollbackTo; 2.0.0 stays installed"))
	c.module = module
	g.Expect(r.applyHolds(c)).To(BeFalse())
	g.Expect(module.Version).To(Equal("2.0.0"), "held at the installed version")
}

// A Kyma waiting for a rollout that no planner looked at lately says so.
func TestHoldForRolloutSaysWhenNoPlannerRuns(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{}
	status := v1beta2.ModuleRolloutStatus{FromVersion: "1.0.0", ToVersion: "2.0.0", Phase: v1beta2.RolloutProgressing, Template: "kcp-system/shop-2.0.0@7"}
	c, _ := rolloutCase("1.0.0", status, rolloutTemplate("1.0.0"), rolloutTemplate("2.0.0"))
	g.Expect(holdForRollout(r, c).held).To(ContainSubstring("(Progressing, which no planner has looked at yet)"))

	c.rollouts[0].Status.PlannedAt = &metav1.Time{Time: c.now.Add(-time.Minute)}
	g.Expect(holdForRollout(r, c).held).To(ContainSubstring("(Progressing); 1.0.0 stays installed"))

	c.rollouts[0].Status.PlannedAt = &metav1.Time{Time: c.now.Add(-10 * time.Minute)}
	g.Expect(holdForRollout(r, c).held).To(ContainSubstring("(Progressing; no planner has looked at it since 2026-12-03T09:50:00Z)"))
}

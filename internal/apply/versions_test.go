package apply_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

// TestObservedVersionsMatchACheapReadUntilSomeoneWrites applies a module
// through an Observed client: the versions it verified (written on the
// first apply, dry-run against the version read on the second) equal what
// ReadVersions reads right after. An edit, a deletion, or our labels taken
// off an object make the read differ; another object of the same kind and
// labels outside the inventory does not.
func TestObservedVersionsMatchACheapReadUntilSomeoneWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	docs := []string{configMap("a", "%[1]s", "1"), configMap("b", "%[1]s", "1"), `{apiVersion: v1, kind: ServiceAccount, metadata: {name: sa, namespace: "%[1]s"}}`}

	for _, pass := range []string{"creating", "unchanged"} {
		observed := &apply.Observed{}
		result, err := apply.NewApplier(observed.Client(runtimeClient), runtimeClient.RESTMapper()).
			ApplyModule(ctx, m.content(t, docs...), m.owner, nil)
		g.Expect(err).NotTo(HaveOccurred(), pass)
		verified := observed.Verified(result.Inventory)
		live, err := apply.ReadVersions(ctx, apply.ModuleLister(runtimeClient, m.owner), result.Inventory, m.owner)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verified.Covers(result.Inventory, live)).To(BeTrue(), "%s: verified %v, read %v", pass, verified, live)
	}
	inventory := apply.InventoryOf(m.content(t, docs...))
	baseline, err := apply.ReadVersions(ctx, apply.ModuleLister(runtimeClient, m.owner), inventory, m.owner)
	g.Expect(err).NotTo(HaveOccurred())

	// Not in the inventory: ignored.
	extra := m.content(t, configMap("extra", "%[1]s", "1"))[0]
	g.Expect(runtimeClient.Create(ctx, extra)).To(Succeed())
	now, err := apply.ReadVersions(ctx, apply.ModuleLister(runtimeClient, m.owner), inventory, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(baseline.Covers(inventory, now)).To(BeTrue())

	changed := func(change func(cm *corev1.ConfigMap)) bool {
		cm := &corev1.ConfigMap{}
		g.Expect(runtimeClient.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: "a"}, cm)).To(Succeed())
		change(cm)
		now, err := apply.ReadVersions(ctx, apply.ModuleLister(runtimeClient, m.owner), inventory, m.owner)
		g.Expect(err).NotTo(HaveOccurred())
		return !baseline.Covers(inventory, now)
	}
	g.Expect(changed(func(cm *corev1.ConfigMap) {
		cm.Data["value"] = "tampered"
		g.Expect(runtimeClient.Update(ctx, cm)).To(Succeed())
	})).To(BeTrue(), "an edit")
	g.Expect(changed(func(cm *corev1.ConfigMap) {
		g.Expect(runtimeClient.Delete(ctx, cm)).To(Succeed())
	})).To(BeTrue(), "a deletion")

	// A listing of every module of the Kyma reads the same, and not an
	// object of the inventory that another module of the Kyma now claims.
	own, err := apply.ReadVersions(ctx, apply.ModuleLister(runtimeClient, m.owner), inventory, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	shared, err := apply.ReadVersions(ctx, apply.KymaLister(runtimeClient, m.owner.Kyma), inventory, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shared).To(Equal(own))
	b := &corev1.ConfigMap{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: "b"}, b)).To(Succeed())
	b.Labels[v1beta2.ModuleNameLabel] = "second"
	g.Expect(runtimeClient.Update(ctx, b)).To(Succeed())
	shared, err = apply.ReadVersions(ctx, apply.KymaLister(runtimeClient, m.owner.Kyma), inventory, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shared).NotTo(HaveKey("/ConfigMap/"+m.namespace+"/b"), "another module's object is not read as this one's")
	b.Labels[v1beta2.ModuleNameLabel] = m.owner.Module
	g.Expect(runtimeClient.Update(ctx, b)).To(Succeed())

	sa := &corev1.ServiceAccount{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: "sa"}, sa)).To(Succeed())
	sa.Labels = nil
	g.Expect(runtimeClient.Update(ctx, sa)).To(Succeed())
	inventory = inventory[1:] // without the deleted one
	now, err = apply.ReadVersions(ctx, apply.ModuleLister(runtimeClient, m.owner), inventory, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now).To(HaveLen(1), "an object without our labels is not read as the module's")
}

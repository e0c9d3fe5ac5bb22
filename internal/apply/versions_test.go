package apply_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
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

// TestAWorkloadsStatusIsNotDrift applies a Deployment through an Observed
// client: a write to its status alone (a rollout, which a module's manager
// goes through on its way to Ready) leaves its Version as verified, so the
// cheap check needs no full one; a change to its spec, labels or
// annotations, by anyone, is drift.
func TestAWorkloadsStatusIsNotDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	deployment := `{apiVersion: apps/v1, kind: Deployment, metadata: {name: manager, namespace: "%[1]s"}, spec: {replicas: 1, selector: {matchLabels: {app: m}}, template: {metadata: {labels: {app: m}}, spec: {containers: [{name: m, image: "m:1"}]}}}}`
	observed := &apply.Observed{}
	result, err := apply.NewApplier(observed.Client(runtimeClient), runtimeClient.RESTMapper()).
		ApplyModule(ctx, m.content(t, deployment), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	verified := observed.Verified(result.Inventory)
	drifted := func() bool {
		live, err := apply.ReadVersions(ctx, apply.ModuleLister(runtimeClient, m.owner), result.Inventory, m.owner)
		g.Expect(err).NotTo(HaveOccurred())
		return !verified.Covers(result.Inventory, live)
	}
	g.Expect(drifted()).To(BeFalse(), "right after the apply")

	live := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: m.namespace, Name: "manager"}
	g.Expect(runtimeClient.Get(ctx, key, live)).To(Succeed())
	rv := live.ResourceVersion
	live.Status = appsv1.DeploymentStatus{ObservedGeneration: live.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	g.Expect(runtimeClient.Status().Update(ctx, live)).To(Succeed())
	g.Expect(live.ResourceVersion).NotTo(Equal(rv), "the status write is a write")
	g.Expect(drifted()).To(BeFalse(), "a status write is not drift")

	for _, c := range []struct {
		name   string
		change func(d *appsv1.Deployment)
	}{
		{"label", func(d *appsv1.Deployment) { d.Labels["someone"] = "else" }},
		// Last: these bump a Deployment's generation, for good.
		{"annotation", func(d *appsv1.Deployment) { d.Annotations = map[string]string{"someone": "else"} }},
		{"spec", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }},
	} {
		name, change := c.name, c.change
		g.Expect(runtimeClient.Get(ctx, key, live)).To(Succeed())
		before := live.DeepCopy()
		change(live)
		g.Expect(runtimeClient.Update(ctx, live)).To(Succeed())
		g.Expect(drifted()).To(BeTrue(), "a change to its %s is drift", name)
		// Put back as it was verified, its Version is the same again.
		if name == "label" {
			before.ResourceVersion = live.ResourceVersion
			g.Expect(runtimeClient.Update(ctx, before)).To(Succeed())
			g.Expect(drifted()).To(BeFalse(), "its %s as verified again", name)
		}
	}
}

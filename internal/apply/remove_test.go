package apply_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

// TestPruneModuleDeletesOnlyWhatTheModuleCreated moves a module to a
// version that keeps one ConfigMap and drops the rest: what the module
// created is deleted; what it adopted is released; what someone else
// relabelled meanwhile is left as it is; the Namespace it created, which
// the kept ConfigMap still uses, is released, not deleted.
func TestPruneModuleDeletesOnlyWhatTheModuleCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	own := m.namespace + "-own"
	g.Expect(runtimeClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "adopted", Namespace: m.namespace,
		Annotations: map[string]string{v1beta2.AdoptableByAnnotation: m.owner.Module}}})).To(Succeed())

	v1, err := applier().ApplyModule(ctx, m.content(t,
		ownNamespace,
		configMap("kept", "%[1]s-own", "1"),
		configMap("dropped", "%[1]s-own", "1"),
		configMap("relabelled", "%[1]s-own", "1"),
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: adopted, namespace: "%[1]s", annotations: {"`+v1beta2.AdoptAnnotation+`": "true"}}}`,
	), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v1.Adopted).To(HaveLen(1))

	// A user takes "relabelled" over: it is not the module's any more.
	relabelled := &corev1.ConfigMap{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKey{Namespace: own, Name: "relabelled"}, relabelled)).To(Succeed())
	taken := relabelled.DeepCopy()
	taken.Labels[v1beta2.ModuleNameLabel] = "users"
	g.Expect(runtimeClient.Patch(ctx, taken, client.MergeFrom(relabelled))).To(Succeed())

	v2, err := applier().ApplyModule(ctx, m.content(t, configMap("kept", "%[1]s-own", "1")), m.owner, v1.Inventory)
	g.Expect(err).NotTo(HaveOccurred())
	keptVersion := live(g, "v1", "ConfigMap", own, "kept").ResourceVersion

	removal, err := applier().PruneModule(ctx, v1.Inventory, v2.Inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Kept).To(BeEmpty())
	g.Expect(removal.Left).To(ConsistOf("ConfigMap " + own + "/relabelled"))
	g.Expect(removal.Released).To(ConsistOf("ConfigMap "+m.namespace+"/adopted", "Namespace "+own))

	g.Expect(live(g, "v1", "ConfigMap", own, "dropped")).To(BeNil(), "what the module created and dropped is deleted")
	kept := live(g, "v1", "ConfigMap", own, "kept")
	g.Expect(kept.ResourceVersion).To(Equal(keptVersion), "what the new version has is not touched")
	left := live(g, "v1", "ConfigMap", own, "relabelled")
	g.Expect(left).NotTo(BeNil(), "what is not the module's any more is never deleted")
	g.Expect(left.ResourceVersion).To(Equal(taken.ResourceVersion), "nor written")
	adopted := live(g, "v1", "ConfigMap", m.namespace, "adopted")
	g.Expect(adopted).NotTo(BeNil(), "an adopted object is released, not deleted")
	g.Expect(adopted.Labels).To(noOwnershipLabels())
	namespace := live(g, "v1", "Namespace", "", own)
	g.Expect(namespace.DeletionTimestamp).To(BeNil(), "a Namespace that the new version still puts objects in stays")
	g.Expect(namespace.Labels).To(noOwnershipLabels())
}

// TestRemoveNeverDeletesAnObjectReplacedMeanwhile replaces one of the
// module's objects by a user's of the same name between the check of its
// labels and its deletion: the UID precondition keeps the user's object,
// the old entry stays in the inventory, and the next attempt leaves it.
func TestRemoveNeverDeletesAnObjectReplacedMeanwhile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	applied, err := applier().ApplyModule(ctx, m.content(t, configMap("replaced", "%[1]s", "module's")), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())

	// The user's replacement happens right after the applier has read the
	// module's object, in the real API server: the interleaving that the
	// precondition is for, made certain instead of left to chance.
	var once sync.Once
	var users *corev1.ConfigMap
	c := interceptor.NewClient(newWithWatch(t), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if err == nil && key.Name == "replaced" {
				once.Do(func() {
					g.Expect(runtimeClient.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "replaced", Namespace: m.namespace}})).To(Succeed())
					users = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "replaced", Namespace: m.namespace}, Data: map[string]string{"value": "user's"}}
					g.Expect(runtimeClient.Create(ctx, users)).To(Succeed())
				})
			}
			return err
		},
	})
	removal, err := apply.NewApplier(c, c.RESTMapper()).RemoveModule(ctx, applied.Inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).To(MatchError(ContainSubstring("ConfigMap " + m.namespace + "/replaced")))
	g.Expect(removal.Kept).To(Equal(applied.Inventory), "what could not be removed stays in the inventory")
	got := live(g, "v1", "ConfigMap", m.namespace, "replaced")
	g.Expect(got).NotTo(BeNil(), "the user's object of the same name is not deleted")
	g.Expect(got.UID).To(Equal(users.UID))

	removal, err = applier().RemoveModule(ctx, removal.Kept, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Left).To(ConsistOf("ConfigMap " + m.namespace + "/replaced"))
	g.Expect(live(g, "v1", "ConfigMap", m.namespace, "replaced").UID).To(Equal(users.UID))
}

// TestRemoveModuleDeletesCustomResourcesBeforeTheirCRD removes a module
// whose content lists an instance of its own CRD before the CRD: the
// instance goes first (its operator can still finalize it), objects in a
// Namespace before the Namespace, and CRDs last (deleting a CRD takes every
// resource of it along).
func TestRemoveModuleDeletesCustomResourcesBeforeTheirCRD(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	applied, err := applier().ApplyModule(ctx, m.content(t,
		widgetInOwn, configMap("settings", "%[1]s-own", "1"), ownNamespace, widgetCRD,
	), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())

	recorder := &deleteRecorder{}
	c := recorder.client(t)
	removal, err := apply.NewApplier(c, c.RESTMapper()).RemoveModule(ctx, applied.Inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Kept).To(BeEmpty())
	crd := "CustomResourceDefinition widgets." + m.group
	g.Expect(recorder.order()).To(Equal([]string{"Widget w", "ConfigMap settings", "Namespace " + m.namespace + "-own", crd}),
		"the module's custom resources first, then the rest, then Namespaces, CRDs last")
	g.Expect(live(g, m.group+"/v1", "Widget", m.namespace+"-own", "w")).To(BeNil())
	g.Eventually(func(g Gomega) {
		g.Expect(live(g, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+m.group)).To(BeNil())
	}, "20s", "100ms").Should(Succeed(), "the CRD goes once the API server has cleaned up behind it")
}

// TestPruneModuleKeepsACRDWhileCustomResourcesOfItExist moves a module to a
// version without its CRD while a user has a resource of it: deleting the
// CRD would make the API server delete the user's resource, so the CRD is
// kept, and named, until the user's resource is gone. The module's own
// instance goes at once.
func TestPruneModuleKeepsACRDWhileCustomResourcesOfItExist(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	crd := "widgets." + m.group
	v1, err := applier().ApplyModule(ctx, m.content(t,
		widgetCRD, `{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: ours, namespace: "%[1]s"}}`,
	), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	users := m.content(t, `{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: users, namespace: "%[1]s"}}`)[0]
	users.SetLabels(nil)
	g.Expect(runtimeClient.Create(ctx, users)).To(Succeed())
	v2, err := applier().ApplyModule(ctx, m.content(t, configMap("settings", "%[1]s", "1")), m.owner, v1.Inventory)
	g.Expect(err).NotTo(HaveOccurred())

	removal, err := applier().PruneModule(ctx, v1.Inventory, v2.Inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Kept).To(Equal([]v1beta2.Resource{resource("apiextensions.k8s.io", "CustomResourceDefinition", "", crd)}),
		"the CRD stays in the inventory")
	g.Expect(removal.Blocked).To(Equal([]string{"CustomResourceDefinition " + crd}))
	g.Expect(live(g, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd).DeletionTimestamp).To(BeNil())
	g.Expect(live(g, m.group+"/v1", "Widget", m.namespace, "users")).NotTo(BeNil(), "the user's resource is not deleted along with the CRD")
	g.Expect(live(g, m.group+"/v1", "Widget", m.namespace, "ours")).To(BeNil(), "the module's own resource is deleted")

	g.Expect(runtimeClient.Delete(ctx, users)).To(Succeed())
	removal, err = applier().PruneModule(ctx, append(slices.Clone(v2.Inventory), removal.Kept...), v2.Inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Kept).To(BeEmpty(), "once they are gone, the CRD goes")
	g.Expect(removal.Blocked).To(BeEmpty())
}

// TestRemoveModuleNamespaceWaitsForOtherModules removes a module that
// created three Namespaces: one that no other module uses is deleted; one
// that a staying module uses is released; one that only modules being
// removed too use is kept, and named as waiting, until they are gone.
func TestRemoveModuleNamespaceWaitsForOtherModules(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	free, inUse, leaving := m.namespace+"-free", m.namespace+"-in-use", m.namespace+"-leaving"
	applied, err := applier().ApplyModule(ctx, m.content(t,
		`{apiVersion: v1, kind: Namespace, metadata: {name: "%[1]s-free"}}`,
		`{apiVersion: v1, kind: Namespace, metadata: {name: "%[1]s-in-use"}}`,
		`{apiVersion: v1, kind: Namespace, metadata: {name: "%[1]s-leaving"}}`,
		configMap("settings", "%[1]s-leaving", "1"),
	), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())

	var asked []string
	opts := apply.RemoveOptions{Owner: m.owner, NamespaceUse: func(_ context.Context, name string) (apply.NamespaceUse, error) {
		asked = append(asked, name)
		g.Expect(live(g, "v1", "ConfigMap", leaving, "settings")).To(BeNil(), "Namespaces are judged after the module's objects in them are gone")
		switch name {
		case inUse:
			return apply.NamespaceInUse, nil
		case leaving:
			return apply.NamespaceInUseByLeaving, nil
		}
		return apply.NamespaceFree, nil
	}}
	removal, err := applier().RemoveModule(ctx, applied.Inventory, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(asked).To(ConsistOf(free, inUse, leaving))
	g.Expect(removal.Waiting).To(Equal([]string{leaving}))
	g.Expect(removal.Kept).To(Equal([]v1beta2.Resource{resource("", "Namespace", "", leaving)}), "a waiting Namespace stays in the inventory")
	g.Expect(removal.Released).To(Equal([]string{"Namespace " + inUse}))

	g.Expect(live(g, "v1", "Namespace", "", free).DeletionTimestamp).NotTo(BeNil(), "a Namespace nobody else uses is deleted")
	for _, name := range []string{inUse, leaving} {
		g.Expect(live(g, "v1", "Namespace", "", name).DeletionTimestamp).To(BeNil(), "Namespace %s is in use and stays", name)
	}
	g.Expect(live(g, "v1", "Namespace", "", inUse).Labels).To(noOwnershipLabels(), "left to the modules that use it")
	g.Expect(live(g, "v1", "Namespace", "", leaving).Labels).To(ownedBy(m.owner), "still the module's, to delete once the others are gone")

	// The other modules are gone now: the waiting Namespace goes.
	removal, err = applier().RemoveModule(ctx, removal.Kept, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Kept).To(BeEmpty())
	g.Expect(live(g, "v1", "Namespace", "", leaving).DeletionTimestamp).NotTo(BeNil())
}

// TestReleaseModuleKeepsObjectsWithoutLabels unmanages a module: its objects
// stay, without our labels but with the record that leads back to the
// Manifest, so that managing the module again takes them back without a
// conflict. Another module's object in the list is not touched.
func TestReleaseModuleKeepsObjectsWithoutLabels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	docs := []string{configMap("a", "%[1]s", "1"), configMap("b", "%[1]s", "1")}
	applied, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	others := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "others", Namespace: m.namespace, Labels: map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: m.owner.Kyma, v1beta2.ModuleNameLabel: "second",
	}}}
	g.Expect(runtimeClient.Create(ctx, others)).To(Succeed())

	list := append(slices.Clone(applied.Inventory), resource("", "ConfigMap", m.namespace, "others"))
	g.Expect(applier().ReleaseModule(ctx, list, m.owner)).To(Succeed())
	for _, name := range []string{"a", "b"} {
		got := live(g, "v1", "ConfigMap", m.namespace, name)
		g.Expect(got).NotTo(BeNil(), "released objects stay")
		g.Expect(got.DeletionTimestamp).To(BeNil())
		g.Expect(got.Labels).To(noOwnershipLabels())
		g.Expect(got.Annotations).To(HaveKeyWithValue(v1beta2.OwnedByAnnotation, m.owner.Manifest))
	}
	g.Expect(live(g, "v1", "ConfigMap", m.namespace, "others").ResourceVersion).To(Equal(others.ResourceVersion), "another module's object is not touched")

	// Managed again, with no inventory (a new Manifest): no conflict.
	again, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Adopted).To(BeEmpty())
	for _, name := range []string{"a", "b"} {
		g.Expect(live(g, "v1", "ConfigMap", m.namespace, name).Labels).To(ownedBy(m.owner), "taken back")
	}
}

// TestDeleteCustomResourceOnlyDeletesTheModules deletes the default custom
// resource: the module's is deleted; one the runtime owner created under
// the same name is left, and EnsureCustomResource never overwrites it.
func TestDeleteCustomResourceOnlyDeletesTheModules(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	_, err := applier().ApplyModule(ctx, m.content(t, widgetCRD), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	m.widgetServed(t)
	cr := m.content(t, `{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: default, namespace: "%[1]s"}, spec: {size: 1}}`)[0]

	state, err := apply.EnsureCustomResource(ctx, runtimeClient, cr, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state).To(Equal(apply.CustomResourceCreated))
	deletion, err := apply.DeleteCustomResource(ctx, runtimeClient, cr, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deletion).To(Equal(apply.CustomResourceDeleting))
	g.Expect(live(g, m.group+"/v1", "Widget", m.namespace, "default")).To(BeNil())

	users := cr.DeepCopy()
	users.SetLabels(nil)
	g.Expect(runtimeClient.Create(ctx, users)).To(Succeed())
	state, err = apply.EnsureCustomResource(ctx, runtimeClient, cr, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state).To(Equal(apply.CustomResourceNotOurs))
	deletion, err = apply.DeleteCustomResource(ctx, runtimeClient, cr, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deletion).To(Equal(apply.CustomResourceLeft))
	got := live(g, m.group+"/v1", "Widget", m.namespace, "default")
	g.Expect(got).NotTo(BeNil(), "the runtime owner's resource is never deleted")
	g.Expect(got.ResourceVersion).To(Equal(users.GetResourceVersion()), "nor written")
}

// TestDeletingAResourceItsOperatorFinalizesIsNoError deletes the default
// custom resource and removes a module whose custom resource its operator
// holds with a finalizer, as real module operators do. The API server
// answers such a delete with the object itself, which controller-runtime's
// typed path cannot decode for a kind outside the scheme: the delete took
// effect, but it was reported as an error ("no kind … is registered"), so
// every removal of such a module failed once and waited for its backoff.
func TestDeletingAResourceItsOperatorFinalizesIsNoError(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	applied, err := applier().ApplyModule(ctx, m.content(t, widgetCRD, widgetInOwn, ownNamespace), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	cr := m.content(t, `{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: default, namespace: "%[1]s", finalizers: [widgets.example.com/operator]}, spec: {size: 1}}`)[0]
	_, err = apply.EnsureCustomResource(ctx, runtimeClient, cr, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	release := func(namespace, name string) {
		w := live(g, m.group+"/v1", "Widget", namespace, name)
		if w == nil {
			return
		}
		g.Expect(client.IgnoreNotFound(runtimeClient.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
	}
	t.Cleanup(func() { release(m.namespace, "default") })

	deletion, err := apply.DeleteCustomResource(ctx, runtimeClient, cr, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deletion).To(Equal(apply.CustomResourceDeleting))
	g.Expect(live(g, m.group+"/v1", "Widget", m.namespace, "default").GetDeletionTimestamp()).NotTo(BeNil(), "its operator finishes it")

	finalized := live(g, m.group+"/v1", "Widget", m.namespace+"-own", "w")
	g.Expect(runtimeClient.Patch(ctx, finalized, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["widgets.example.com/operator"]}}`)))).To(Succeed())
	t.Cleanup(func() { release(m.namespace+"-own", "w") })
	// The runtime owner's Widget beside the module's, in the module's own
	// Namespace: never deleted, and it keeps the CRD.
	owners := m.content(t, `{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: owners, namespace: "%[1]s-own"}, spec: {size: 2}}`)[0]
	owners.SetLabels(nil)
	g.Expect(runtimeClient.Create(ctx, owners)).To(Succeed())
	removal, err := applier().RemoveModule(ctx, applied.Inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Kept).NotTo(BeEmpty(), "the CRD and the namespace wait for the resources")
	g.Expect(live(g, m.group+"/v1", "Widget", m.namespace+"-own", "w").GetDeletionTimestamp()).NotTo(BeNil())
	g.Expect(live(g, m.group+"/v1", "Widget", m.namespace+"-own", "owners").GetDeletionTimestamp()).To(BeNil(), "the runtime owner's resource is not deleted")
	g.Expect(live(g, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+m.group).GetDeletionTimestamp()).To(BeNil(), "nor the CRD it needs")
}

// newWithWatch is a client of the test runtime for an interceptor.
func newWithWatch(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(runtimeConfig, client.Options{Scheme: runtimeClient.Scheme(), Mapper: runtimeClient.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

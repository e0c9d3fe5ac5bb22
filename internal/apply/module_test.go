package apply_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

// Content documents shared by the tests. %[1]s is the test's namespace,
// %[2]s its CRD group.
const (
	widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.%[2]s}
spec:
  group: %[2]s
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
	// ownNamespace is a Namespace the module creates.
	ownNamespace = `{apiVersion: v1, kind: Namespace, metadata: {name: "%[1]s-own"}}`
	widgetInOwn  = `{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: w, namespace: "%[1]s-own"}, spec: {size: 1}}`
)

// configMap is a content document of a ConfigMap in namespace (a format
// verb, like "%[1]s-own") with one data entry.
func configMap(name, namespace, value string) string {
	return `{apiVersion: v1, kind: ConfigMap, metadata: {name: ` + name + `, namespace: "` + namespace + `"}, data: {value: "` + value + `"}}`
}

// TestApplyModuleCreatesOwnedObjectsInStages applies content listed in the
// worst order (an instance before its CRD, objects before their Namespace):
// the staged apply creates it all, labelled as the module's; applying the
// same content again writes nothing; a change writes only what changed.
func TestApplyModuleCreatesOwnedObjectsInStages(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	docs := []string{widgetInOwn, configMap("settings", "%[1]s-own", "1"), widgetCRD, ownNamespace}
	own := m.namespace + "-own"

	first, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Changed).To(Equal(4))
	g.Expect(first.Adopted).To(BeEmpty())
	g.Expect(first.UsedAsIs).To(BeEmpty())
	g.Expect(first.NewKinds).To(Equal([]schema.GroupKind{{Group: m.group, Kind: "Widget"}}),
		"the apply created the Widget CRD: its kind is new to the runtime")
	g.Expect(first.Inventory).To(Equal([]v1beta2.Resource{
		resource(m.group, "Widget", own, "w"),
		resource("", "ConfigMap", own, "settings"),
		resource("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets."+m.group),
		resource("", "Namespace", "", own),
	}), "the inventory lists every applied object, in content order, with the namespace the API server has")

	versions := map[string]string{}
	for _, r := range first.Inventory {
		obj := live(g, r.Group+"/"+r.Version, r.Kind, r.Namespace, r.Name)
		g.Expect(obj).NotTo(BeNil(), "%s %s was created", r.Kind, r.Name)
		g.Expect(obj.Labels).To(ownedBy(m.owner), "%s %s carries the module's labels", r.Kind, r.Name)
		g.Expect(obj.Annotations).To(HaveKeyWithValue(v1beta2.OwnedByAnnotation, m.owner.Manifest))
		versions[r.Kind] = obj.ResourceVersion
	}
	versionOf := func(r v1beta2.Resource) string {
		return live(g, r.Group+"/"+r.Version, r.Kind, r.Namespace, r.Name).ResourceVersion
	}

	again, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, first.Inventory)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Changed).To(BeZero(), "nothing drifted, nothing is written")
	g.Expect(again.NewKinds).To(BeEmpty(), "the Widget CRD existed: no kind is new")
	g.Expect(again.Inventory).To(Equal(first.Inventory))
	for _, r := range first.Inventory {
		g.Expect(versionOf(r)).To(Equal(versions[r.Kind]), "%s %s is not written again", r.Kind, r.Name)
	}

	docs[1] = configMap("settings", "%[1]s-own", "2")
	changed, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, again.Inventory)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed.Changed).To(Equal(1))
	settings := &corev1.ConfigMap{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKey{Namespace: own, Name: "settings"}, settings)).To(Succeed())
	g.Expect(settings.Data).To(HaveKeyWithValue("value", "2"))
	for _, r := range first.Inventory {
		if r.Kind != "ConfigMap" {
			g.Expect(versionOf(r)).To(Equal(versions[r.Kind]), "%s %s did not change and is not written", r.Kind, r.Name)
		}
	}
}

// TestApplyModuleConflictAppliesNothing ships objects that exist and are not
// the module's: a user's, and another module's (whose adopt annotation in
// our content changes nothing). Nothing of the batch is applied, and the
// error names each conflict and its holder.
func TestApplyModuleConflictAppliesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	users := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "users", Namespace: m.namespace}, Data: map[string]string{"value": "mine"}}
	g.Expect(runtimeClient.Create(ctx, users)).To(Succeed())
	others := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "others", Namespace: m.namespace, Labels: map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: m.owner.Kyma, v1beta2.ModuleNameLabel: "second",
	}}}
	g.Expect(runtimeClient.Create(ctx, others)).To(Succeed())

	objects := m.content(t,
		configMap("fresh", "%[1]s", "new"),
		configMap("users", "%[1]s", "module's"),
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: others, namespace: "%[1]s", annotations: {"`+v1beta2.AdoptAnnotation+`": "true"}}}`,
	)
	_, err := applier().ApplyModule(ctx, objects, m.owner, nil)
	var conflict *apply.ConflictError
	g.Expect(errors.As(err, &conflict)).To(BeTrue(), "a conflict is a *ConflictError, got %v", err)
	g.Expect(conflict.Conflicts).To(ConsistOf(
		apply.Conflict{Object: "ConfigMap " + m.namespace + "/users", Holder: "not created by lifecycle-manager"},
		apply.Conflict{Object: "ConfigMap " + m.namespace + "/others", Holder: "module second's"},
	))

	g.Expect(live(g, "v1", "ConfigMap", m.namespace, "fresh")).To(BeNil(), "nothing of a conflicting batch is applied")
	got := &corev1.ConfigMap{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKeyFromObject(users), got)).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(users.ResourceVersion), "the user's object is not written")
	g.Expect(got.Labels).To(noOwnershipLabels())
	g.Expect(live(g, "v1", "ConfigMap", m.namespace, "others").ResourceVersion).To(Equal(others.ResourceVersion),
		"another module's object is not written, adopt annotation or not")
}

// TestApplyModuleAdoptsWhenAllowed ships an existing object of the runtime
// owner with the adopt annotation: it is a conflict until the runtime owner
// consents on the object; then it is adopted, and the record of it
// survives applying again; removing the module releases it instead of
// deleting it.
func TestApplyModuleAdoptsWhenAllowed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	existing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "adoptable", Namespace: m.namespace}, Data: map[string]string{"value": "user's"}}
	g.Expect(runtimeClient.Create(ctx, existing)).To(Succeed())
	docs := []string{`{apiVersion: v1, kind: ConfigMap, metadata: {name: adoptable, namespace: "%[1]s", annotations: {"` +
		v1beta2.AdoptAnnotation + `": "true"}}, data: {value: "module's"}}`}

	// The module asking alone takes nothing over.
	_, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, nil)
	conflict := &apply.ConflictError{}
	g.Expect(errors.As(err, &conflict)).To(BeTrue(), "without the runtime owner's consent: %v", err)
	g.Expect(err.Error()).To(ContainSubstring(v1beta2.AdoptableByAnnotation + ": " + m.owner.Module))
	g.Expect(live(g, "v1", "ConfigMap", m.namespace, "adoptable").Labels).To(noOwnershipLabels())

	// The runtime owner consents.
	consenting := existing.DeepCopy()
	consenting.Annotations = map[string]string{v1beta2.AdoptableByAnnotation: m.owner.Module}
	g.Expect(runtimeClient.Patch(ctx, consenting, client.MergeFrom(existing))).To(Succeed())

	result, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Adopted).To(Equal([]string{"ConfigMap " + m.namespace + "/adoptable"}))
	g.Expect(result.Inventory).To(Equal([]v1beta2.Resource{resource("", "ConfigMap", m.namespace, "adoptable")}))
	got := &corev1.ConfigMap{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKeyFromObject(existing), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(existing.UID), "adopted, not replaced")
	g.Expect(got.Labels).To(ownedBy(m.owner))
	g.Expect(got.Annotations).To(HaveKeyWithValue(v1beta2.AdoptedAnnotation, "true"))
	g.Expect(got.Data).To(HaveKeyWithValue("value", "module's"))

	again, err := applier().ApplyModule(ctx, m.content(t, docs...), m.owner, result.Inventory)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Changed).To(BeZero())
	g.Expect(again.Adopted).To(BeEmpty(), "adopted once")
	g.Expect(live(g, "v1", "ConfigMap", m.namespace, "adoptable").Annotations).To(HaveKeyWithValue(v1beta2.AdoptedAnnotation, "true"),
		"applying the content, which has no adopted record, keeps the record")

	removal, err := applier().RemoveModule(ctx, again.Inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Released).To(Equal([]string{"ConfigMap " + m.namespace + "/adoptable"}))
	g.Expect(runtimeClient.Get(ctx, client.ObjectKeyFromObject(existing), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(existing.UID), "an adopted object is never deleted")
	g.Expect(got.DeletionTimestamp).To(BeNil())
	g.Expect(got.Labels).To(noOwnershipLabels())
	g.Expect(got.Annotations).NotTo(HaveKey(v1beta2.AdoptedAnnotation))
	g.Expect(got.Annotations).NotTo(HaveKey(v1beta2.OwnedByAnnotation), "released for good: nothing leads back to the module")
}

// TestApplyModuleUsesExistingNamespacesAsIs ships the sync namespace and a
// user's namespace, both existing: neither is written nor becomes part of
// the inventory, and removing the module never deletes either, even when an
// older inventory listed them and one of them carries our labels.
func TestApplyModuleUsesExistingNamespacesAsIs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	m.owner.SyncNamespace = m.namespace
	usersNamespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.namespace + "-users"}}
	g.Expect(runtimeClient.Create(ctx, usersNamespace)).To(Succeed())
	syncNamespace := &corev1.Namespace{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKey{Name: m.namespace}, syncNamespace)).To(Succeed())

	result, err := applier().ApplyModule(ctx, m.content(t,
		`{apiVersion: v1, kind: Namespace, metadata: {name: "%[1]s"}}`,
		`{apiVersion: v1, kind: Namespace, metadata: {name: "%[1]s-users"}}`,
		configMap("a", "%[1]s", "1"),
		configMap("b", "%[1]s-users", "1"),
	), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.UsedAsIs).To(ConsistOf("Namespace "+m.namespace, "Namespace "+usersNamespace.Name))
	g.Expect(result.Inventory).To(Equal([]v1beta2.Resource{
		resource("", "ConfigMap", m.namespace, "a"),
		resource("", "ConfigMap", usersNamespace.Name, "b"),
	}), "a Namespace used as it is is not the module's")
	for _, ns := range []*corev1.Namespace{syncNamespace, usersNamespace} {
		got := live(g, "v1", "Namespace", "", ns.Name)
		g.Expect(got.ResourceVersion).To(Equal(ns.ResourceVersion), "Namespace %s is not written", ns.Name)
		g.Expect(got.Labels).To(noOwnershipLabels())
	}

	// Say an older version labelled the sync namespace as the module's.
	labelled := syncNamespace.DeepCopy()
	labelled.Labels = map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: m.owner.Kyma, v1beta2.ModuleNameLabel: m.owner.Module,
	}
	g.Expect(runtimeClient.Patch(ctx, labelled, client.MergeFrom(syncNamespace))).To(Succeed())
	inventory := append(slices.Clone(result.Inventory),
		resource("", "Namespace", "", m.namespace),
		resource("", "Namespace", "", usersNamespace.Name))
	removal, err := applier().RemoveModule(ctx, inventory, apply.RemoveOptions{Owner: m.owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removal.Kept).To(BeEmpty())
	g.Expect(removal.Left).To(ConsistOf("Namespace " + usersNamespace.Name))
	g.Expect(removal.Released).To(ConsistOf("Namespace " + m.namespace))
	g.Expect(live(g, "v1", "ConfigMap", m.namespace, "a")).To(BeNil(), "the module's objects in them are deleted")
	g.Expect(live(g, "v1", "ConfigMap", usersNamespace.Name, "b")).To(BeNil())
	for _, name := range []string{m.namespace, usersNamespace.Name} {
		got := live(g, "v1", "Namespace", "", name)
		g.Expect(got).NotTo(BeNil())
		g.Expect(got.DeletionTimestamp).To(BeNil(), "Namespace %s is never deleted", name)
		g.Expect(got.Labels).To(noOwnershipLabels())
	}
}

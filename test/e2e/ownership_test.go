package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// Ownership (SPEC "Trust boundaries"): a module writes and deletes only what
// is its own. These tests put modules next to each other and next to the
// runtime owner's objects, and remove them.

// rawModule publishes version 1.0.0 of a module whose raw manifest is the
// given YAML documents, on the regular channel.
func rawModule(t *testing.T, name string, documents ...string) {
	t.Helper()
	publish(t, env.registry, name, "1.0.0", ociartifact.Module{RawManifest: []byte(strings.Join(documents, "\n---\n"))})
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
}

func configMapYAML(namespace, name, key, value string, annotations ...string) string {
	doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name)
	if namespace != "" {
		doc += fmt.Sprintf("  namespace: %s\n", namespace)
	}
	if len(annotations) > 0 {
		doc += "  annotations:\n"
		for _, a := range annotations {
			doc += "    " + a + "\n"
		}
	}
	return doc + fmt.Sprintf("data:\n  %s: %q\n", key, value)
}

func namespaceYAML(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", name)
}

func clusterRoleYAML(name string) string {
	return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get]\n", name)
}

// withModules sets the Kyma's modules.
func (k *testKyma) withModules(t *testing.T, modules ...v1beta2.Module) {
	t.Helper()
	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Modules = modules })
}

// eventuallyManifestGone waits until the module's Manifest is removed, which
// means its removal from the runtime finished.
func (k *testKyma) eventuallyManifestGone(t *testing.T, moduleName string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		err := env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-" + moduleName}, &v1beta2.Manifest{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Manifest of %s still there", moduleName)
	}, timeout, interval).Should(Succeed())
}

// eventuallyModuleReady waits until the module itself is Ready: the Kyma
// may still be Ready from before the module was added.
func (k *testKyma) eventuallyModuleReady(t *testing.T, moduleName string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, moduleName)
		g.Expect(m.State).To(Equal(v1beta2.StateReady), m.Message)
	}, timeout, interval).Should(Succeed())
}

func (k *testKyma) eventuallyModuleConflict(t *testing.T, moduleName string, names ...string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, moduleName)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		for _, name := range names {
			g.Expect(m.Message).To(ContainSubstring(name))
		}
		manifest := &v1beta2.Manifest{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-" + moduleName}, manifest)).To(Succeed())
		g.Expect(manifest.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Reason", "OwnershipConflict"))))
	}, timeout, interval).Should(Succeed())
}

// createInRuntime creates an object of the runtime owner, once the runtime's
// sync namespace exists.
func (k *testKyma) createInRuntime(t *testing.T, obj client.Object) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		return k.runtime.client.Create(context.Background(), obj)
	}, timeout, interval).Should(Succeed())
	t.Cleanup(func() { _ = k.runtime.client.Delete(context.Background(), obj) })
}

// TestOwnershipOverlappingModules installs two modules that ship the same
// ClusterRole: the second reports a conflict naming it and takes nothing
// over; removing it leaves the first one's objects; removing the first
// deletes its ClusterRole, and the second then installs on its own.
func TestOwnershipOverlappingModules(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const first, second, shared = "overlap-first", "overlap-second", "overlap-shared"
	rawModule(t, first, clusterRoleYAML(shared), configMapYAML("", first+"-config", "module", first))
	rawModule(t, second, clusterRoleYAML(shared), configMapYAML("", second+"-config", "module", second))

	k := newKyma(t, module(first))
	k.eventuallyReady(t)
	role := &rbacv1.ClusterRole{}
	g.Expect(k.runtime.client.Get(ctx, client.ObjectKey{Name: shared}, role)).To(Succeed())
	firstRoleUID := role.UID

	k.withModules(t, module(first), module(second))
	k.eventuallyModuleConflict(t, second, "ClusterRole "+shared+" (module "+first+"'s)")
	g.Expect(k.runtime.client.Get(ctx, client.ObjectKey{Name: shared}, role)).To(Succeed())
	g.Expect(role.Labels).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, first), "the second module takes nothing over")
	g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, second+"-config"))).To(BeTrue(), "a conflicting module version is not applied")

	// Removing the second module leaves the first one's objects.
	k.withModules(t, module(first))
	k.eventuallyManifestGone(t, second)
	g.Expect(k.runtime.client.Get(ctx, client.ObjectKey{Name: shared}, role)).To(Succeed())
	g.Expect(role.UID).To(Equal(firstRoleUID))
	g.Expect(role.Labels).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, first))
	g.Expect(k.inRuntime(&corev1.ConfigMap{}, first+"-config")).To(Succeed())
	k.eventuallyReady(t)

	// Removing the first deletes what it created; the second then installs.
	k.withModules(t, module(first), module(second))
	k.eventuallyModuleConflict(t, second, "ClusterRole "+shared)
	k.withModules(t, module(second))
	k.eventuallyManifestGone(t, first)
	g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, first+"-config"))).To(BeTrue())
	k.eventuallyReady(t)
	g.Expect(k.runtime.client.Get(ctx, client.ObjectKey{Name: shared}, role)).To(Succeed())
	g.Expect(role.UID).NotTo(Equal(firstRoleUID), "the second module created its own")
	g.Expect(role.Labels).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, second))
	g.Expect(k.inRuntime(&corev1.ConfigMap{}, second+"-config")).To(Succeed())
}

// TestOwnershipRuntimeOwnersObjectIsNotTakenOver has a module ship an object
// that the runtime owner created under the same name: it is not written,
// the module reports the conflict, and removing the module leaves it.
func TestOwnershipRuntimeOwnersObjectIsNotTakenOver(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "owners-object"
	rawModule(t, name, configMapYAML("", "owners-settings", "from", "module"), configMapYAML("", name+"-config", "module", name))

	k := newKyma(t)
	owners := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owners-settings", Namespace: v1beta2.DefaultRuntimeNamespace},
		Data:       map[string]string{"from": "owner"},
	}
	k.createInRuntime(t, owners)

	k.withModules(t, module(name))
	k.eventuallyModuleConflict(t, name, "ConfigMap kyma-system/owners-settings (not created by lifecycle-manager)", v1beta2.AdoptAnnotation)
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(env.kcpClient.List(ctx, events, client.InNamespace(kcpNamespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("Regarding.Name", k.name+"-"+name), HaveField("Reason", "OwnershipConflict"))))
	}, timeout, interval).Should(Succeed())
	got := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(got, "owners-settings")).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string]string{"from": "owner"}), "the runtime owner's object is not overwritten")
	g.Expect(got.Labels).NotTo(HaveKey(v1beta2.ManagedByLabel))
	g.Expect(got.ResourceVersion).To(Equal(owners.ResourceVersion), "never written")

	k.withModules(t)
	k.eventuallyManifestGone(t, name)
	g.Expect(k.inRuntime(got, "owners-settings")).To(Succeed(), "removing the module leaves the runtime owner's object")
	g.Expect(got.Data).To(Equal(map[string]string{"from": "owner"}))
	g.Expect(got.ResourceVersion).To(Equal(owners.ResourceVersion))
}

// TestOwnershipNamespaces installs a module that ships the sync namespace,
// a namespace that it creates and one that another module also ships. The
// sync namespace is used, never taken over nor deleted; removing the module
// deletes the namespace it alone uses, and leaves the shared one to the
// other module, with that module's object in it.
func TestOwnershipNamespaces(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const creator, guest = "spaces-creator", "spaces-guest"
	const shared, solo = "spaces-shared", "spaces-solo"
	rawModule(t, creator,
		namespaceYAML(v1beta2.DefaultRuntimeNamespace), namespaceYAML(shared), namespaceYAML(solo),
		configMapYAML("", creator+"-config", "module", creator),
		configMapYAML(shared, creator+"-inside", "module", creator),
		configMapYAML(solo, creator+"-solo", "module", creator))
	rawModule(t, guest, namespaceYAML(shared), configMapYAML(shared, guest+"-inside", "module", guest))

	k := newKyma(t, module(samplemodules.Evolving), module(creator))
	k.eventuallyReady(t)
	k.withModules(t, module(samplemodules.Evolving), module(creator), module(guest))
	k.eventuallyModuleReady(t, guest)

	rc := k.runtime.client
	syncNamespace := &corev1.Namespace{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: v1beta2.DefaultRuntimeNamespace}, syncNamespace)).To(Succeed())
	g.Expect(syncNamespace.Labels).NotTo(HaveKey(v1beta2.ManagedByLabel), "the sync namespace is not taken over")
	ns := &corev1.Namespace{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: shared}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, creator), "the guest uses the namespace as it is")
	t.Cleanup(func() {
		_ = rc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shared}})
	})

	k.withModules(t, module(samplemodules.Evolving), module(guest))
	k.eventuallyManifestGone(t, creator)
	g.Eventually(func(g Gomega) {
		gone := &corev1.Namespace{}
		err := rc.Get(ctx, client.ObjectKey{Name: solo}, gone)
		g.Expect(apierrors.IsNotFound(err) || gone.DeletionTimestamp != nil).To(BeTrue(), "the namespace the module alone used is deleted")
	}, timeout, interval).Should(Succeed())
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: v1beta2.DefaultRuntimeNamespace}, syncNamespace)).To(Succeed())
	g.Expect(syncNamespace.DeletionTimestamp).To(BeNil(), "the sync namespace is never deleted by a module")
	g.Expect(k.inRuntime(&corev1.ConfigMap{}, "evolving-config")).To(Succeed(), "another module's object in the sync namespace stays")
	g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, creator+"-config"))).To(BeTrue())

	g.Expect(rc.Get(ctx, client.ObjectKey{Name: shared}, ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).To(BeNil(), "a namespace another module uses is not deleted")
	g.Expect(ns.Labels).NotTo(HaveKey(v1beta2.ModuleNameLabel), "it is released")
	g.Expect(rc.Get(ctx, client.ObjectKey{Namespace: shared, Name: guest + "-inside"}, &corev1.ConfigMap{})).To(Succeed(), "the other module's object in it stays")
	g.Eventually(func(g Gomega) {
		err := rc.Get(ctx, client.ObjectKey{Namespace: shared, Name: creator + "-inside"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the module's own object in it is deleted")
	}, timeout, interval).Should(Succeed())
	k.eventuallyReady(t)
}

// TestOwnershipAdoptionAllowed has a module that asks to adopt an object of
// the runtime owner, who consents on the object: it is adopted (labelled, written, recorded as
// adopted), and on removal released, not deleted.
func TestOwnershipAdoptionAllowed(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const name = "adopter"
	rawModule(t, name, configMapYAML("", "adoptee", "from", "module", v1beta2.AdoptAnnotation+`: "true"`))

	k := newKyma(t)
	owners := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "adoptee", Namespace: v1beta2.DefaultRuntimeNamespace, Labels: map[string]string{"app": "owners"},
			Annotations: map[string]string{v1beta2.AdoptableByAnnotation: name}},
		Data: map[string]string{"from": "owner"},
	}
	k.createInRuntime(t, owners)

	k.withModules(t, module(name))
	k.eventuallyModuleReady(t, name)
	adopted := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(adopted, "adoptee")).To(Succeed())
	g.Expect(adopted.UID).To(Equal(owners.UID), "adopted, not recreated")
	g.Expect(adopted.Data).To(HaveKeyWithValue("from", "module"))
	g.Expect(adopted.Labels).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, name))
	g.Expect(adopted.Annotations).To(HaveKeyWithValue(v1beta2.AdoptedAnnotation, "true"))

	k.withModules(t)
	k.eventuallyManifestGone(t, name)
	released := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(released, "adoptee")).To(Succeed(), "an adopted object is released, not deleted")
	g.Expect(released.UID).To(Equal(owners.UID))
	g.Expect(released.Labels).To(Equal(map[string]string{"app": "owners"}))
	g.Expect(released.Annotations).NotTo(HaveKey(v1beta2.AdoptedAnnotation))
	g.Expect(released.Annotations).NotTo(HaveKey(v1beta2.OwnedByAnnotation))
}

// crdYAML defines kind (namespaced, v1, any fields) in the group
// ownership.e2e.example.
func crdYAML(kind string) string {
	lower := strings.ToLower(kind)
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[2]ss.ownership.e2e.example
spec:
  group: ownership.e2e.example
  names: {kind: %[1]s, listKind: %[1]sList, plural: %[2]ss, singular: %[2]s}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, kind, lower)
}

var widgetKind = schema.GroupVersionKind{Group: "ownership.e2e.example", Version: "v1", Kind: "Widget"}

// TestOwnershipOwnCustomResourceDoesNotBlockRemoval has a module whose
// manifest ships an instance of its own CRD (as the public template-operator
// does): it is the module's, so removing the Kyma removes it with the module
// instead of waiting for it forever.
func TestOwnershipOwnCustomResourceDoesNotBlockRemoval(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "self-widget"
	publish(t, env.registry, name, "1.0.0", ociartifact.Module{
		CRDs:        []byte(crdYAML("Widget")),
		RawManifest: []byte("apiVersion: ownership.e2e.example/v1\nkind: Widget\nmetadata:\n  name: shipped\nspec:\n  size: 1\n"),
	})
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})

	k := newKyma(t, module(name))
	k.eventuallyReady(t)
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(widgetKind)
	g.Expect(k.inRuntime(widget, "shipped")).To(Succeed())

	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		kyma := &v1beta2.Kyma{}
		err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, kyma)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Kyma deletion hangs: %s", describe(kyma))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := k.runtime.client.Get(ctx, client.ObjectKey{Name: "widgets.ownership.e2e.example"}, crd)
		g.Expect(apierrors.IsNotFound(err) || crd.DeletionTimestamp != nil).To(BeTrue(), "the module's CRD is removed")
	}, timeout, interval).Should(Succeed())
}

// TestOwnershipDefaultCustomResourceOfTheRuntimeOwnerIsNotDeleted has the
// runtime owner create a custom resource under the name of a module's
// default one: the module uses it as it is, and its removal does not delete
// it.
func TestOwnershipDefaultCustomResourceOfTheRuntimeOwnerIsNotDeleted(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const provider, name = "gadget-provider", "gadget-user"
	gadgetKind := schema.GroupVersionKind{Group: "ownership.e2e.example", Version: "v1", Kind: "Gadget"}
	publish(t, env.registry, provider, "1.0.0", ociartifact.Module{CRDs: []byte(crdYAML("Gadget"))})
	newReleaseMeta(t, provider, map[string]string{"regular": "1.0.0"})

	// The module's content is a ConfigMap; its default CR is a Gadget.
	defaultCR := &unstructured.Unstructured{}
	defaultCR.SetGroupVersionKind(gadgetKind)
	defaultCR.SetName("default")
	content := ociartifact.Module{RawManifest: goodManifest(name, "1.0.0")}
	artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:1.0.0", env.registry.Host(), name), content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	template := samplemodules.Version{Module: name, Version: "1.0.0", DefaultCR: defaultCR}.Template(kcpNamespace, artifact.Links)
	g.Expect(env.kcpClient.Create(ctx, template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})

	k := newKyma(t, module(provider))
	k.eventuallyReady(t)
	owners := &unstructured.Unstructured{}
	owners.SetGroupVersionKind(gadgetKind)
	owners.SetName("default")
	owners.SetNamespace(v1beta2.DefaultRuntimeNamespace)
	owners.Object["spec"] = map[string]any{"owner": "runtime"}
	owners.Object["status"] = map[string]any{"state": "Ready"}
	k.createInRuntime(t, owners)

	k.withModules(t, module(provider), module(name))
	k.eventuallyModuleReady(t, name)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(gadgetKind)
	g.Expect(k.inRuntime(got, "default")).To(Succeed())
	g.Expect(got.GetUID()).To(Equal(owners.GetUID()))
	g.Expect(got.GetLabels()).NotTo(HaveKey(v1beta2.ManagedByLabel), "the runtime owner's resource is not written")

	k.withModules(t, module(provider))
	k.eventuallyManifestGone(t, name)
	g.Expect(k.inRuntime(got, "default")).To(Succeed(), "the module's removal does not delete the runtime owner's resource")
	g.Expect(got.GetUID()).To(Equal(owners.GetUID()))
}

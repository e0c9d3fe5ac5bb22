package api_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// statusWriter is the field manager of the test's status writes, as the
// operator's reconcilers write status: merge patches of the status
// subresource, under the process's own name.
const statusWriter = "lifecycle-manager"

// TestStatusIsOneManagedField: the Kyma's and the Manifest's status are
// atomic for field ownership, so that each costs the control plane's API
// server one managed-fields entry of one field, not one per field (the API
// server keeps every entry in its watch cache, as maps). A merge patch of
// part of the status still keeps the rest: atomic is about ownership, not
// about what a merge patch writes.
func TestStatusIsOneManagedField(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "kyma", Namespace: ns}}
	manifest := &v1beta2.Manifest{
		ObjectMeta: metav1.ObjectMeta{Name: "kyma-template-operator", Namespace: ns},
		Spec: v1beta2.ManifestSpec{
			Remote: true, Version: "1.0.0", ModuleName: "template-operator",
			Resources: []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://registry.local/modules/t@sha256:" + sha}},
		},
	}
	g.Expect(k8sClient.Create(ctx, kyma)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, manifest)).To(Succeed())

	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "ready", LastTransitionTime: metav1.Now()}
	patchStatus(g, kyma, func() {
		kyma.Status.State = v1beta2.StateReady
		kyma.Status.Conditions = []metav1.Condition{ready}
		kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "template-operator", State: v1beta2.StateReady, Version: "1.0.0"}}
	})
	patchStatus(g, manifest, func() {
		manifest.Status.State = v1beta2.StateReady
		manifest.Status.Conditions = []metav1.Condition{ready}
		manifest.Status.Synced = []v1beta2.Resource{{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: ns, Name: "c"}}
	})
	// Part of the status, as a reconcile writes only what changed.
	patchStatus(g, kyma, func() { kyma.Status.State = v1beta2.StateProcessing })
	patchStatus(g, manifest, func() { manifest.Status.State = v1beta2.StateProcessing })

	gotKyma, gotManifest := &v1beta2.Kyma{}, &v1beta2.Manifest{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(kyma), gotKyma)).To(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(manifest), gotManifest)).To(Succeed())
	for _, obj := range []client.Object{gotKyma, gotManifest} {
		var status []metav1.ManagedFieldsEntry
		for _, e := range obj.GetManagedFields() {
			if e.Subresource == "status" {
				status = append(status, e)
			}
		}
		g.Expect(status).To(HaveLen(1), "%T: one managed-fields entry for the status writer", obj)
		g.Expect(status[0].Manager).To(Equal(statusWriter))
		g.Expect(status[0].FieldsV1.GetRawString()).To(Equal(`{"f:status":{}}`), "%T: the status is owned as one field", obj)
	}
	g.Expect(gotKyma.Status.State).To(Equal(v1beta2.StateProcessing))
	g.Expect(gotKyma.Status.Modules).To(HaveLen(1), "the second patch kept what it did not name")
	g.Expect(gotKyma.Status.Conditions).To(HaveLen(1))
	g.Expect(gotManifest.Status.State).To(Equal(v1beta2.StateProcessing))
	g.Expect(gotManifest.Status.Synced).To(HaveLen(1), "the second patch kept what it did not name")
	g.Expect(gotManifest.Status.Conditions).To(HaveLen(1))
}

// patchStatus merge-patches the status of obj with what change sets.
func patchStatus[T client.Object](g Gomega, obj T, change func()) {
	base := obj.DeepCopyObject().(client.Object) //nolint:forcetypeassert // a copy of a client.Object is one
	change()
	g.Expect(k8sClient.Status().Patch(context.Background(), obj, client.MergeFrom(base), client.FieldOwner(statusWriter))).To(Succeed())
}

// specWriter is the field manager of the test's Manifest applies, as the
// Kyma controller writes Manifests: one forced server-side apply.
const specWriter = "lifecycle-manager-kyma"

// TestManifestSpecIsOneManagedField: the Manifest's spec is atomic for
// field ownership, so the Kyma controller's apply owns it as one field
// however large the default custom resource inside it is; and a spec that
// someone else changed is replaced whole by the next apply, as declared.
func TestManifestSpecIsOneManagedField(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	desired := func(version string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1beta2.GroupVersion.String(), "kind": "Manifest",
			"metadata": map[string]any{"name": "kyma-sample", "namespace": ns, "labels": map[string]any{v1beta2.ModuleNameLabel: "sample"}},
			"spec": map[string]any{
				"remote": true, "version": version, "moduleName": "sample",
				"resources": []any{map[string]any{"name": "rawManifest", "link": "oci://registry.local/modules/s@sha256:" + sha}},
				"resource": map[string]any{
					"apiVersion": "sample.example.com/v1", "kind": "Sample",
					"metadata": map[string]any{"name": "default"},
					"spec":     map[string]any{"replicas": int64(2), "nested": map[string]any{"a": "1", "b": "2"}},
				},
			},
		}}
		return u
	}
	apply := func(u *unstructured.Unstructured) {
		g.Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(specWriter), client.ForceOwnership)).To(Succeed())
	}
	apply(desired("1.0.0"))

	got := &v1beta2.Manifest{}
	key := client.ObjectKey{Namespace: ns, Name: "kyma-sample"}
	g.Expect(k8sClient.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.GetManagedFields()).To(HaveLen(1))
	g.Expect(got.GetManagedFields()[0].Manager).To(Equal(specWriter))
	g.Expect(got.GetManagedFields()[0].FieldsV1.GetRawString()).To(ContainSubstring(`"f:spec":{}`), "the spec is owned as one field")
	g.Expect(got.GetManagedFields()[0].FieldsV1.GetRawString()).NotTo(ContainSubstring(`f:replicas`))

	// Someone edits the spec, as kubectl edit would: the next apply puts
	// back the declared spec, all of it.
	got.Spec.Debug = true
	got.Spec.SyncNamespace = "elsewhere"
	g.Expect(k8sClient.Update(ctx, got, client.FieldOwner("kubectl-edit"))).To(Succeed())
	apply(desired("1.1.0"))
	g.Expect(k8sClient.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Spec.Version).To(Equal("1.1.0"))
	g.Expect(got.Spec.Debug).To(BeFalse(), "a field the apply does not declare is not kept from another writer")
	g.Expect(got.Spec.SyncNamespace).To(BeEmpty())
	g.Expect(got.Spec.Resource.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("replicas", BeEquivalentTo(2))))
	for _, e := range got.GetManagedFields() {
		g.Expect(e.FieldsV1.GetRawString()).NotTo(And(ContainSubstring(`"f:spec"`), Not(ContainSubstring(`"f:spec":{}`))),
			"%s owns the spec as one field or not at all", e.Manager)
	}
}

package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestEveryKindRoundTripsWithDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	// Written as a user would, leaving out every field that has a default
	// (a typed Go client would send managed: false).
	kyma := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.kyma-project.io/v1beta2", "kind": "Kyma",
		"metadata": map[string]any{"name": "kyma", "namespace": ns},
		"spec":     map[string]any{"modules": []any{map[string]any{"name": "template-operator"}}},
	}}
	template := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "template-operator-1.0.0", Namespace: ns},
		Spec: v1beta2.ModuleTemplateSpec{
			ModuleName: "template-operator",
			Version:    "1.0.0",
			Resources:  []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://registry.local/modules/t@sha256:" + sha}},
			Data: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Sample",
				"metadata": map[string]any{"name": "sample"}, "spec": map[string]any{"size": int64(1)},
			}},
		},
	}
	releaseMeta := &v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Name: "template-operator", Namespace: ns},
		Spec: v1beta2.ModuleReleaseMetaSpec{
			ModuleName: "template-operator",
			Channels:   []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "1.0.0"}},
		},
	}
	manifest := &v1beta2.Manifest{
		ObjectMeta: metav1.ObjectMeta{Name: "kyma-template-operator", Namespace: ns},
		Spec: v1beta2.ManifestSpec{
			Remote: true, Version: "1.0.0", ModuleName: "template-operator",
			Resources: template.Spec.Resources,
			Values:    &runtime.RawExtension{Raw: []byte(`{"replicas":2}`)},
		},
	}
	watcher := &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "kyma-watcher", Namespace: ns},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "listener", Namespace: "kcp-system", Port: 8082},
			ResourceToWatch: v1beta2.WatchableGVR{Group: "operator.kyma-project.io", Version: "*", Resource: "kymas"},
			Field:           v1beta2.SpecField,
		},
	}

	for _, obj := range []client.Object{kyma, template, releaseMeta, manifest, watcher} {
		g.Expect(k8sClient.Create(ctx, obj)).To(Succeed(), "%T", obj)
	}

	gotKyma := &v1beta2.Kyma{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(kyma), gotKyma)).To(Succeed())
	g.Expect(gotKyma.Spec.Channel).To(Equal(v1beta2.DefaultChannel), "channel defaults to regular")
	g.Expect(gotKyma.Spec.Modules[0].CustomResourcePolicy).To(Equal(v1beta2.CustomResourcePolicyCreateAndDelete))
	g.Expect(gotKyma.Spec.Modules[0].Managed).To(BeTrue(), "managed defaults to true")

	gotTemplate := &v1beta2.ModuleTemplate{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(template), gotTemplate)).To(Succeed())
	g.Expect(gotTemplate.Spec.Data.Object).To(Equal(template.Spec.Data.Object), "the default CR is kept as written")
	g.Expect(gotTemplate.Spec.Target).To(Equal(v1beta2.TargetRuntime))
	g.Expect(gotTemplate.Spec.Resources).To(Equal(template.Spec.Resources))

	gotMeta := &v1beta2.ModuleReleaseMeta{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(releaseMeta), gotMeta)).To(Succeed())
	g.Expect(gotMeta.Spec.Channels).To(Equal(releaseMeta.Spec.Channels))

	gotManifest := &v1beta2.Manifest{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(manifest), gotManifest)).To(Succeed())
	g.Expect(gotManifest.Spec.CustomResourcePolicy).To(Equal(v1beta2.CustomResourcePolicyCreateAndDelete))
	g.Expect(gotManifest.Spec.Values.Raw).To(MatchJSON(`{"replicas":2}`))

	gotWatcher := &v1beta2.Watcher{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(watcher), gotWatcher)).To(Succeed())
	g.Expect(gotWatcher.Spec).To(Equal(watcher.Spec))
}

func TestStatusIsASubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "kyma", Namespace: ns}}
	g.Expect(k8sClient.Create(ctx, kyma)).To(Succeed())

	kyma.Status.State = v1beta2.StateReady
	kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "m", State: v1beta2.StateReady, Version: "1.0.0"}}
	g.Expect(k8sClient.Status().Update(ctx, kyma)).To(Succeed())

	// A write to the main resource does not change status, and the reverse.
	kyma.Spec.Channel = "fast"
	kyma.Status.State = v1beta2.StateError
	g.Expect(k8sClient.Update(ctx, kyma)).To(Succeed())

	got := &v1beta2.Kyma{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(kyma), got)).To(Succeed())
	g.Expect(got.Spec.Channel).To(Equal("fast"))
	g.Expect(got.Status.State).To(Equal(v1beta2.StateReady))
	g.Expect(got.Status.Modules).To(HaveLen(1))
}

// TestKymaAPIObjectsApplyUnchanged applies objects written for the Kyma
// lifecycle-manager API with strict field validation: every field of that
// API must be known to ours.
func TestKymaAPIObjectsApplyUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	strict := client.WithFieldValidation(k8sClient, metav1.FieldValidationStrict)
	objects := readObjects(g, "testdata/kyma-api-compat.yaml")
	for _, obj := range objects {
		obj.SetNamespace(ns)
		g.Expect(strict.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	g.Expect(objects).To(HaveLen(5), "one object of every kind")
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestKymaAPIStatusesApplyUnchanged writes a Kyma's and a Manifest's
// status as the Kyma lifecycle-manager writes them (testdata/
// klm-written.yaml: the Manifest as its parser builds it, localizedImages
// included), with strict field validation, and reads back the fields this
// API fills the same way.
func TestKymaAPIStatusesApplyUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	strict := client.WithFieldValidation(k8sClient, metav1.FieldValidationStrict)
	written := readObjects(g, "testdata/klm-written.yaml")
	for _, obj := range written {
		obj.SetNamespace(ns)
		status := obj.Object["status"]
		g.Expect(strict.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		obj.Object["status"] = status
		g.Expect(strict.Status().Update(ctx, obj)).To(Succeed(), "status of %s %s", obj.GetKind(), obj.GetName())
	}
	g.Expect(written).To(HaveLen(2))

	kyma := &v1beta2.Kyma{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "klm-kyma"}, kyma)).To(Succeed())
	g.Expect(kyma.Status.Modules).To(HaveLen(1))
	g.Expect(kyma.Status.Modules[0].OCMComponentName).To(Equal("kyma-project.io/module/template-operator"))
	manifest := &v1beta2.Manifest{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "klm-kyma-template-operator-3685110897"}, manifest)).To(Succeed())
	g.Expect(manifest.Spec.LocalizedImages).To(Equal([]string{
		"europe-docker.pkg.dev/kyma-project/prod/template-operator:1.0.1",
		"europe-docker.pkg.dev/kyma-project/prod/external/busybox:1.36",
	}))
	g.Expect(manifest.Status.Synced).To(HaveLen(2))
}

// readObjects decodes every object of a YAML file.
func readObjects(g Gomega, path string) []*unstructured.Unstructured {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	return decodeObjects(g, data)
}

// decodeObjects decodes every object of YAML data.
func decodeObjects(g Gomega, data []byte) []*unstructured.Unstructured {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objects []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objects
			}
			g.Expect(err).NotTo(HaveOccurred())
		}
		if len(obj.Object) > 0 {
			objects = append(objects, obj)
		}
	}
}

// TestIgnoredKymaFieldsAreAcceptedAndKept: a module's controller and
// remoteModuleTemplateRef, which the operator ignores (it says so in the
// Kyma's FieldsIgnored condition), are accepted with strict field
// validation and stored as written, not pruned, so that a resource written
// for the Kyma lifecycle-manager reads back unchanged.
func TestIgnoredKymaFieldsAreAcceptedAndKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	strict := client.WithFieldValidation(k8sClient, metav1.FieldValidationStrict)
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: "ignored-fields", Namespace: ns},
		Spec: v1beta2.KymaSpec{Modules: []v1beta2.Module{{
			Name: "template-operator", ControllerName: "manifest-controller", RemoteModuleTemplateRef: "kyma-system/template-operator-regular",
		}}},
	}
	g.Expect(strict.Create(ctx, kyma)).To(Succeed())
	got := &v1beta2.Kyma{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(kyma), got)).To(Succeed())
	g.Expect(got.Spec.Modules).To(ConsistOf(And(
		HaveField("ControllerName", "manifest-controller"),
		HaveField("RemoteModuleTemplateRef", "kyma-system/template-operator-regular"),
	)))
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm/ocmtest"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// klmComponent is the OCM component name KLM's tooling gives a module.
func klmComponent(module string) string { return "kyma-project.io/module/" + module }

// klmCRD is a CRD shipped in a module's manifest directory.
func klmCRD(module string) []byte {
	return fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: shops.%[1]s.e2e.example
spec:
  group: %[1]s.e2e.example
  names: {kind: Shop, listKind: ShopList, plural: shops, singular: shop}
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, module)
}

// publishKLM pushes a component version to the test registry as KLM's
// tooling lays it out (the descriptor layer, then each blob as a layer of
// the same manifest, with their real media types; an external manager
// image without a layer) and creates its ModuleTemplate as KLM publishes
// it: spec.descriptor and no spec.resources. With lookup, the template's
// descriptor names only the component version and its repository, and the
// operator reads the resources from the registry.
func publishKLM(t *testing.T, module, version string, blobs []ocmtest.Blob, lookup bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	descriptor, err := ocmtest.Push(ctx, env.registry.Host()+"/kyma-modules", ocmtest.ComponentVersion{
		Name: klmComponent(module), Version: version, Blobs: blobs,
		External: []map[string]any{{
			"name": "module-image", "type": "ociArtifact", "relation": "external", "version": version,
			"access": map[string]any{"type": "ociArtifact", "imageReference": "europe-docker.pkg.dev/kyma-project/prod/" + module + ":" + version},
		}},
	}, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	if lookup {
		var d map[string]any
		g.Expect(json.Unmarshal(descriptor, &d)).To(Succeed())
		delete(d["component"].(map[string]any), "resources")
		descriptor, err = json.Marshal(d)
		g.Expect(err).NotTo(HaveOccurred())
	}
	template := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-" + version, Namespace: kcpNamespace},
		Spec: v1beta2.ModuleTemplateSpec{
			ModuleName: module,
			Version:    version,
			Descriptor: runtime.RawExtension{Raw: descriptor},
			Info:       &v1beta2.ModuleInfo{Repository: "https://github.com/kyma-project/" + module, Documentation: "https://kyma-project.io"},
		},
	}
	g.Expect(env.kcpClient.Create(ctx, template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
}

// newKLMReleaseMeta is the module's ModuleReleaseMeta as KLM writes it,
// naming the OCM component.
func newKLMReleaseMeta(t *testing.T, module string, channels map[string]string) {
	t.Helper()
	g := NewWithT(t)
	meta := samplemodules.ReleaseMeta(kcpNamespace, module, channels)
	meta.Spec.OcmComponentName = klmComponent(module)
	g.Expect(env.kcpClient.Create(context.Background(), meta)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), meta) })
}

// klmManifestDir is a module's manifest directory packed as modulectl packs
// it (application/x-tgz): the CRD and the module's objects in files of
// their own, and a file that is not a manifest.
func klmManifestDir(t *testing.T, module, version string) ocmtest.Blob {
	t.Helper()
	g := NewWithT(t)
	tgz, err := ocmtest.TarGz(map[string][]byte{
		"manifests/README.md":   []byte("# " + module),
		"manifests/crd.yaml":    klmCRD(module),
		"manifests/config.yaml": goodManifest(module, version),
	})
	g.Expect(err).NotTo(HaveOccurred())
	return ocmtest.Blob{Name: "raw-manifest", Type: "directory", MediaType: "application/x-tgz", Data: tgz}
}

func klmDefaultCR(t *testing.T, module string) ocmtest.Blob {
	t.Helper()
	g := NewWithT(t)
	tarred, err := ocmtest.Tar(map[string][]byte{"default-cr.yaml": fmt.Appendf(nil, "apiVersion: %s.e2e.example/v1alpha1\nkind: Shop\nmetadata:\n  name: default\n", module)})
	g.Expect(err).NotTo(HaveOccurred())
	return ocmtest.Blob{Name: "default-cr", Type: "directory", MediaType: "application/x-tar", Data: tarred}
}

// TestKLMPublishedModuleInstalls checks item 2 of issue 17: a module
// published the KLM way, an OCM component version in an OCI registry and a
// ModuleTemplate with only spec.descriptor, installs unchanged to Ready,
// from the descriptor's own resources (as KLM's templates embed them) and
// from the component version in the registry (a descriptor that names
// only the component version).
func TestKLMPublishedModuleInstalls(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "klm-shop"
	publishKLM(t, name, "1.0.0", []ocmtest.Blob{klmManifestDir(t, name, "1.0.0"), klmDefaultCR(t, name)}, false)
	newKLMReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})

	k := newKyma(t, module(name))
	k.eventuallyReady(t)
	expectModuleReadyAt(t, k, name, "1.0.0")
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	g.Expect(k.runtime.client.Get(ctx, client.ObjectKey{Name: "shops." + name + ".e2e.example"}, crd)).To(Succeed(), "every manifest of the packed directory is installed")
	g.Eventually(func(g Gomega) {
		m := k.manifest(g, name)
		g.Expect(m.Spec.Resources).To(ConsistOf(HaveField("Link", HavePrefix(
			fmt.Sprintf("oci://%s/kyma-modules/component-descriptors/%s@sha256:", env.registry.Host(), klmComponent(name))))),
			"the Manifest links the raw manifest's layer of the component version, by digest")
		g.Expect(m.Spec.LocalizedImages).To(Equal([]string{"europe-docker.pkg.dev/kyma-project/prod/" + name + ":1.0.0"}),
			"the descriptor's image resources are the Manifest's localized images, as KLM sets them")
		g.Expect(k.moduleStatus(g, name).OCMComponentName).To(Equal(klmComponent(name)))
	}, timeout, interval).Should(Succeed())

	// 2.0.0's template names the component version only: its resources come
	// from the registry; its raw manifest is plain YAML.
	publishKLM(t, name, "2.0.0", []ocmtest.Blob{
		{Name: "raw-manifest", Type: "yaml", MediaType: "application/octet-stream", Data: goodManifest(name, "2.0.0")},
	}, true)
	setChannel(t, name, "regular", "2.0.0")
	expectModuleReadyAt(t, k, name, "2.0.0")
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, name+"-config")).To(Succeed())
	g.Expect(cm.Labels).To(HaveKeyWithValue(v1beta2.KymaNameLabel, k.name), "installed and owned like any module")
}

// A component version whose descriptor lacks the raw manifest is the
// module's Error, saying which resource is missing and which there are;
// what is installed stays. Publishing a good version fixes it.
func TestKLMDescriptorMissingResourceIsError(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const name = "klm-broken"
	publishKLM(t, name, "1.0.0", []ocmtest.Blob{klmManifestDir(t, name, "1.0.0")}, false)
	newKLMReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))
	expectModuleReadyAt(t, k, name, "1.0.0")

	publishKLM(t, name, "2.0.0", []ocmtest.Blob{klmDefaultCR(t, name)}, false)
	setChannel(t, name, "regular", "2.0.0")
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, name)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		g.Expect(m.Message).To(ContainSubstring(`component %s:2.0.0 has no resource "raw-manifest" (it has resources default-cr, module-image)`, klmComponent(name)))
		g.Expect(m.Version).To(Equal("1.0.0"), "what is installed stays installed")
		g.Expect(k.get(g).Status.State).To(Equal(v1beta2.StateError))
	}, timeout, interval).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, name+"-config")).To(Succeed(), "a bad descriptor deletes nothing")
	g.Expect(cm.Data).To(HaveKeyWithValue("version", "1.0.0"))
	g.Expect(k.manifest(g, name).Spec.Version).To(Equal("1.0.0"), "the Manifest is left as it was")

	publishKLM(t, name, "2.0.1", []ocmtest.Blob{klmManifestDir(t, name, "2.0.1")}, false)
	setChannel(t, name, "regular", "2.0.1")
	expectModuleReadyAt(t, k, name, "2.0.1")
}

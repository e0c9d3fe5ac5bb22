package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm/ocmtest"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// bareRuns numbers the runs of
// TestKLMTemplateWithoutDescriptorResolvesThroughRegistryHost.
var bareRuns atomic.Int64

// klmModulesBase is where the e2e operator's --oci-registry-host points
// (main_test.go setup): the test registry, path kyma-modules, plain HTTP.
func klmModulesBase() string { return env.registry.Host() + "/kyma-modules" }

// pushKLMComponent pushes a component version to klmModulesBase as KLM's
// tooling lays it out (publishKLM), and nothing else.
func pushKLMComponent(t *testing.T, module, version string, blobs []ocmtest.Blob) {
	t.Helper()
	_, err := ocmtest.Push(context.Background(), klmModulesBase(), ocmtest.ComponentVersion{Name: klmComponent(module), Version: version, Blobs: blobs,
		External: []map[string]any{klmImage(module, version)}}, name.Insecure)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// klmImage is the module's manager image as its component version lists it
// (an external ociArtifact), and as KLM puts it in the Manifest's
// spec.localizedImages.
func klmImage(module, version string) map[string]any {
	return map[string]any{
		"name": "module-image", "type": "ociArtifact", "relation": "external", "version": version,
		"access": map[string]any{"type": "ociArtifact", "imageReference": "europe-docker.pkg.dev/kyma-project/prod/" + module + ":" + version},
	}
}

// createBareKLMTemplate creates a module version's ModuleTemplate as
// modulectl writes it for KLM 1.20 and later, which reads the component
// descriptor from its --oci-registry-host: spec.moduleName, spec.version,
// the default CR and info; no spec.descriptor, no spec.resources.
func createBareKLMTemplate(t *testing.T, module, version string) {
	t.Helper()
	template := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-" + version, Namespace: kcpNamespace},
		Spec: v1beta2.ModuleTemplateSpec{
			ModuleName: module,
			Version:    version,
			Info:       &v1beta2.ModuleInfo{Repository: "https://github.com/kyma-project/" + module, Documentation: "https://kyma-project.io"},
		},
	}
	NewWithT(t).Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
}

// TestKLMTemplateWithoutDescriptorResolvesThroughRegistryHost checks item 6
// of issue 35: a ModuleTemplate without an embedded descriptor installs as
// KLM installs it, from the component version in the registry
// --oci-registry-host names, found by the ModuleReleaseMeta's
// spec.ocmComponentName and the template's spec.version. Each step's
// status says what is missing: the component name, then (on upgrade) the
// component version; what is installed stays, and publishing what is
// missing is enough.
func TestKLMTemplateWithoutDescriptorResolvesThroughRegistryHost(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const mod = "klm-bare"
	pushKLMComponent(t, mod, "1.0.0", []ocmtest.Blob{klmManifestDir(t, mod, "1.0.0")})
	createBareKLMTemplate(t, mod, "1.0.0")
	// A ModuleReleaseMeta that names no component: nothing says which
	// component version to read.
	meta := samplemodules.ReleaseMeta(kcpNamespace, mod, map[string]string{"regular": "1.0.0"})
	g.Expect(env.kcpClient.Create(ctx, meta)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), meta) })

	k := newKyma(t, module(mod))
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, mod)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		g.Expect(m.Message).To(ContainSubstring(`ModuleTemplate %s-1.0.0: no embedded descriptor, and ModuleReleaseMeta %q names no OCM component; set its spec.ocmComponentName (e.g. kyma-project.io/module/%s)`, mod, mod, mod))
		g.Expect(k.get(g).Status.State).To(Equal(v1beta2.StateError))
	}, timeout, interval).Should(Succeed())
	err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, mod)}, &v1beta2.Manifest{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Manifest links content that could not be found: %v", err)

	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(meta), meta)).To(Succeed())
		meta.Spec.OcmComponentName = klmComponent(mod)
		g.Expect(env.kcpClient.Update(ctx, meta)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	expectModuleReadyAt(t, k, mod, "1.0.0")
	g.Eventually(func(g Gomega) {
		m := k.manifest(g, mod)
		g.Expect(m.Spec.Resources).To(ConsistOf(HaveField("Link", HavePrefix(
			fmt.Sprintf("oci://%s/component-descriptors/%s@sha256:", klmModulesBase(), klmComponent(mod))))),
			"the Manifest links the raw manifest's layer in the configured registry, by digest")
		g.Expect(m.Spec.LocalizedImages).To(Equal([]string{"europe-docker.pkg.dev/kyma-project/prod/" + mod + ":1.0.0"}),
			"the images of the descriptor read from the registry, as KLM sets them: the rendered images are KLM's, and nothing rolls on takeover")
		status := k.moduleStatus(g, mod)
		g.Expect(status.OCMComponentName).To(Equal(klmComponent(mod)))
		g.Expect(status.Message).NotTo(ContainSubstring("descriptor"), "the earlier Error is gone")
	}, timeout, interval).Should(Succeed())
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	g.Expect(k.runtime.client.Get(ctx, client.ObjectKey{Name: "shops." + mod + ".e2e.example"}, crd)).To(Succeed(), "every manifest of the packed directory is installed")

	// The next version's template is published before its component
	// version: the module's Error names the reference it read; 1.0.0 stays
	// installed. (A version of its own per run: the registry outlives a
	// run of -count.)
	next := fmt.Sprintf("2.0.%d", bareRuns.Add(1))
	createBareKLMTemplate(t, mod, next)
	setChannel(t, mod, "regular", next)
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, mod)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		g.Expect(m.Message).To(ContainSubstring("ModuleTemplate %s-%s: component version %s:%s is not in the registry (%s/component-descriptors/%s:%s)",
			mod, next, klmComponent(mod), next, klmModulesBase(), klmComponent(mod), next))
		g.Expect(m.Version).To(Equal("1.0.0"), "what is installed stays installed")
	}, timeout, interval).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, mod+"-config")).To(Succeed(), "a missing component version deletes nothing")
	g.Expect(cm.Data).To(HaveKeyWithValue("version", "1.0.0"))
	g.Expect(k.manifest(g, mod).Spec.Version).To(Equal("1.0.0"), "the Manifest is left as it was")

	// Pushing the component version is enough; its raw manifest is plain
	// YAML this time, with the module's manager as built (its image in
	// the build registry) and a helper image the component version does
	// not list.
	rawManifest := append(goodManifest(mod, next), fmt.Appendf(nil, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s-manager
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s-manager}}
  template:
    metadata: {labels: {app: %[1]s-manager}}
    spec:
      containers:
        - {name: manager, image: "registry.build.example/dev/%[1]s:dev"}
        - {name: helper, image: "registry.build.example/tools/helper:1"}
`, mod)...)
	pushKLMComponent(t, mod, next, []ocmtest.Blob{
		{Name: "raw-manifest", Type: "yaml", MediaType: "application/octet-stream", Data: rawManifest},
	})
	expectModuleReadyAt(t, k, mod, next)
	g.Expect(k.inRuntime(cm, mod+"-config")).To(Succeed())
	g.Expect(cm.Labels).To(HaveKeyWithValue(v1beta2.KymaNameLabel, k.name), "installed and owned like any module")
	localized := "europe-docker.pkg.dev/kyma-project/prod/" + mod + ":" + next
	g.Expect(k.manifest(g, mod).Spec.LocalizedImages).To(Equal([]string{localized}), "the new version's descriptor, read from the registry")
	deployment := &appsv1.Deployment{}
	g.Expect(k.inRuntime(deployment, mod+"-manager")).To(Succeed())
	g.Expect(deployment.Spec.Template.Spec.Containers).To(ConsistOf(
		And(HaveField("Name", "manager"), HaveField("Image", localized)),
		And(HaveField("Name", "helper"), HaveField("Image", "registry.build.example/tools/helper:1"))),
		"the manager runs the localized image, as under KLM; an image the descriptor does not list is left as built")
	g.Eventually(func(g Gomega) {
		g.Expect(k.moduleStatus(g, mod).Message).NotTo(ContainSubstring("not in the registry"), "the earlier Error is gone")
		g.Expect(k.get(g).Status.State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())
}

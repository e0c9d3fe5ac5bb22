package kyma

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm/ocmtest"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// readsFromRegistryHost gives the operator the content pipeline of an
// operator started with --oci-registry-host http://<reg>/kyma-modules, as
// internal/operator wires it: the descriptors of templates without one
// embedded are read from reg, their components named by the modules'
// ModuleReleaseMetas (read through the operator's cache).
func readsFromRegistryHost(t *testing.T, op *operatorUnderTest, reg *testregistry.Registry) {
	t.Helper()
	opts := content.DefaultOptions()
	opts.OCIRegistryHost = "http://" + reg.Host()
	opts.ModulesRepositorySubPath = "kyma-modules"
	pipeline, err := content.New(opts, nil)
	if err != nil {
		t.Fatalf("starting the content pipeline: %v", err)
	}
	op.r.Pinner = pipeline
	op.r.Descriptors = pipeline.Descriptors(ocm.ReleaseMetaComponents{Reader: op.cache})
}

// imageResource is an image a component version lists, as KLM's tooling
// lists the manager image: an external ociArtifact.
func imageResource(resource, ref string) map[string]any {
	return map[string]any{
		"name": resource, "type": "ociArtifact", "relation": "external", "version": "1.0.0",
		"access": map[string]any{"type": "ociArtifact", "imageReference": ref},
	}
}

// TestLocalizedImagesOfATemplateWithoutDescriptor closes the gap of issue
// 35 item 6: a ModuleTemplate without an embedded descriptor, whose
// component version the content pipeline reads from --oci-registry-host,
// gets the same spec.localizedImages on its Manifest as the same
// descriptor embedded gives (KLM sets them from the registry's
// descriptor, so a module taken over renders the same images and nothing
// rolls). Across a restart during a registry outage the Manifest keeps
// its images and is not written; a new template revision during the
// outage is the module's Error, saying why, and the Manifest is left as
// it was; once the registry is back the retry writes the new revision
// with its images.
func TestLocalizedImagesOfATemplateWithoutDescriptor(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	startRemovalsEnv(t)
	c := removalsEnv.client
	reg := testregistry.Start()
	t.Cleanup(reg.Close)

	bare, embedded := module(t, "bare"), module(t, "embedded")
	component := "kyma-project.io/module/" + bare
	manager := "europe-docker.pkg.dev/kyma-project/prod/" + bare + ":1.0.0"
	sidecar := "europe-docker.pkg.dev/kyma-project/prod/sidecar:2.1"
	descriptor, err := ocmtest.Push(ctx, reg.Host()+"/kyma-modules", ocmtest.ComponentVersion{
		Name: component, Version: "1.0.0",
		Blobs: []ocmtest.Blob{{Name: "raw-manifest", Type: "yaml", MediaType: "application/octet-stream",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + bare + "\n")}},
		// The manager image twice (as two resources), and a sidecar.
		External: []map[string]any{imageResource("module-image", manager), imageResource("sidecar-image", sidecar), imageResource("manager-again", manager)},
	}, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())

	op := startOperatorUnderTest(t)
	readsFromRegistryHost(t, op, reg)
	kymaName := kymaNameFor(t)
	k := &removalKyma{t: t, name: kymaName, op: op}
	bareTemplate := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: bare + "-1.0.0", Namespace: removalsNamespace},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: bare, Version: "1.0.0"},
	}
	objs := []client.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: kymaName + "-kubeconfig", Namespace: removalsNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: kymaName}},
			Data:       map[string][]byte{remote.KubeconfigKey: removalsEnv.runtime.Kubeconfig()},
		},
		// As modulectl writes it for KLM 1.20: no descriptor, no links.
		bareTemplate,
		&v1beta2.ModuleReleaseMeta{
			ObjectMeta: metav1.ObjectMeta{Name: bare, Namespace: removalsNamespace},
			Spec: v1beta2.ModuleReleaseMetaSpec{ModuleName: bare, OcmComponentName: component,
				Channels: []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "1.0.0"}}},
		},
		// The same component version's descriptor, embedded.
		&v1beta2.ModuleTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: embedded + "-1.0.0", Namespace: removalsNamespace},
			Spec:       v1beta2.ModuleTemplateSpec{ModuleName: embedded, Version: "1.0.0", Descriptor: runtime.RawExtension{Raw: descriptor}},
		},
		&v1beta2.ModuleReleaseMeta{
			ObjectMeta: metav1.ObjectMeta{Name: embedded, Namespace: removalsNamespace},
			Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: embedded, Channels: []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "1.0.0"}}},
		},
		&v1beta2.Kyma{
			ObjectMeta: metav1.ObjectMeta{Name: kymaName, Namespace: removalsNamespace},
			Spec: v1beta2.KymaSpec{Channel: "regular", SyncNamespace: "sync-" + kymaName,
				Modules: []v1beta2.Module{{Name: bare, Managed: true}, {Name: embedded, Managed: true}}},
		},
	}
	for _, obj := range objs {
		g.Expect(c.Create(ctx, obj)).To(Succeed(), "creating %T %s", obj, obj.GetName())
	}

	k.install(bare, embedded)
	want := []string{manager, sidecar}
	fromRegistry, ok := k.manifest(bare)
	g.Expect(ok).To(BeTrue())
	fromEmbedded, ok := k.manifest(embedded)
	g.Expect(ok).To(BeTrue())
	g.Expect(fromEmbedded.Spec.LocalizedImages).To(Equal(want), "the embedded descriptor's images, each once")
	g.Expect(fromRegistry.Spec.LocalizedImages).To(Equal(fromEmbedded.Spec.LocalizedImages), "the descriptor read from the registry gives what the same one embedded gives")
	g.Expect(fromRegistry.Spec.Resources).To(ConsistOf(HaveField("Link", HavePrefix("oci://"+reg.Host()+"/kyma-modules/component-descriptors/"+component+"@sha256:"))))
	for _, m := range []string{bare, embedded} {
		status := entry(k.get(), m)
		g.Expect(status).NotTo(BeNil(), m)
		g.Expect(status.OCMComponentName).To(Equal(component), m)
		g.Expect(status.State).To(Equal(v1beta2.StateReady), m)
	}

	// The operator restarts while the registry is down: nothing of the
	// template changed, so the Manifest keeps its pins and its images and
	// is not written; the module stays Ready.
	op.shutdown()
	reg.Stop()
	restarted := startOperatorUnderTest(t)
	readsFromRegistryHost(t, restarted, reg)
	k.op = restarted
	k.reconcile()
	k.reconcile()
	kept, _ := k.manifest(bare)
	g.Expect(kept.ResourceVersion).To(Equal(fromRegistry.ResourceVersion), "the Manifest is not written during the outage")
	g.Expect(kept.Spec.LocalizedImages).To(Equal(want))
	status := entry(k.get(), bare)
	g.Expect(status.State).To(Equal(v1beta2.StateReady))
	g.Expect(status.Message).NotTo(ContainSubstring("descriptor"))

	// A new revision of the template while the registry is still down:
	// the module's Error names the template and the registry it could not
	// read; the Manifest is left as it was, its images too.
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bareTemplate), bareTemplate)).To(Succeed())
	bareTemplate.Spec.Info = &v1beta2.ModuleInfo{Documentation: "https://kyma-project.io/" + bare}
	g.Expect(c.Update(ctx, bareTemplate)).To(Succeed())
	revision := string(bareTemplate.UID) + "/" + bareTemplate.ResourceVersion
	NewWithT(t).Eventually(func(g Gomega) {
		// As the template's watch event would (not wired here), once the
		// operator's cache has the new revision.
		restarted.r.catalog.invalidate()
		k.reconcile()
		status := entry(k.get(), bare)
		g.Expect(status).NotTo(BeNil())
		g.Expect(status.State).To(Equal(v1beta2.StateError))
		g.Expect(status.Message).To(ContainSubstring("ModuleTemplate %s-1.0.0: reading component version %s:1.0.0: reading manifest %s/kyma-modules/component-descriptors/%s:1.0.0: ",
			bare, component, reg.Host(), component))
		g.Expect(status.Message).To(ContainSubstring("connection refused"))
	}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	kept, _ = k.manifest(bare)
	g.Expect(kept.Annotations).NotTo(HaveKeyWithValue(templateRevisionAnnotation, revision))
	g.Expect(kept.Spec.LocalizedImages).To(Equal(want), "no image is dropped")
	// The images alone, when the links are at hand (a rollout pinned them):
	// an error that says so for a Manifest of another revision, never none.
	current := &v1beta2.ModuleTemplate{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bareTemplate), current)).To(Succeed())
	_, err = restarted.r.localizedImages(ctx, current, revision, kept)
	g.Expect(err).To(MatchError(ContainSubstring("reading the images of the module's OCM component descriptor: ModuleTemplate %s-1.0.0: ", bare)))
	g.Expect(errors.Is(err, ocm.ErrInvalid)).To(BeFalse(), "an outage is retried, not the template's to fix")

	// The registry is back: the retry writes the new revision, with the
	// images.
	g.Expect(reg.Restart()).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		k.reconcile()
		m, ok := k.manifest(bare)
		g.Expect(ok).To(BeTrue())
		g.Expect(m.Annotations).To(HaveKeyWithValue(templateRevisionAnnotation, revision))
		g.Expect(m.Spec.LocalizedImages).To(Equal(want))
		g.Expect(entry(k.get(), bare).Message).NotTo(ContainSubstring(reg.Host()), "the Error is gone")
	}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
}

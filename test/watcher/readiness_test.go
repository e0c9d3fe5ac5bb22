package watcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// A module whose own operator reports its CR Ready is shown Ready on the
// Kyma within seconds, although the operator looks at a Processing Manifest
// only every 10 minutes here (and at a Ready or failed one every hour):
// the agent reports the module's resources by itself — the manager
// Deployment becoming Available and the CR's status — and the report
// requeues the Manifest. Nothing in this package creates a Watcher for
// Deployments or Samples.
func TestModuleReadinessIsEventDriven(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newWatchedKyma(t, "readiness")
	publishSample(t)

	g.Eventually(func(g Gomega) {
		cp := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, cp)).To(Succeed())
		addModule(samplemodules.Sample)(cp)
		g.Expect(env.kcpClient.Update(ctx, cp)).To(Succeed())
	}, timeout, interval).Should(Succeed())

	// The module is installed and waits for its operator, played here by
	// the test: the CR has no state yet.
	manifestKey := client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, samplemodules.Sample)}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
	g.Eventually(func(g Gomega) {
		g.Expect(env.rtClient.Get(ctx, client.ObjectKey{Namespace: runtimeNamespace, Name: "default"}, cr)).To(Succeed())
		manifest := &v1beta2.Manifest{}
		g.Expect(env.kcpClient.Get(ctx, manifestKey, manifest)).To(Succeed())
		g.Expect(manifest.Status.State).To(Equal(v1beta2.StateProcessing))
	}, timeout, interval).Should(Succeed())

	g.Expect(unstructured.SetNestedField(cr.Object, string(v1beta2.StateReady), "status", "state")).To(Succeed())
	g.Expect(env.rtClient.Status().Update(ctx, cr)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		cp := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, cp)).To(Succeed())
		g.Expect(cp.Status.Modules).To(ContainElement(And(
			HaveField("Name", samplemodules.Sample), HaveField("State", v1beta2.StateReady))))
		g.Expect(cp.Status.State).To(Equal(v1beta2.StateReady))
	}, 30*time.Second, 20*time.Millisecond).Should(Succeed(), "the module's readiness waits for the Processing poll")
	t.Logf("module Ready on the Kyma %s after its CR", time.Since(start).Round(time.Millisecond))
}

// publishSample pushes the sample module (CRD, manager Deployment, default
// CR) and offers it in the regular channel, once per package run.
func publishSample(t testing.TB) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	if err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: samplemodules.Sample}, &v1beta2.ModuleReleaseMeta{}); err == nil {
		return
	}
	v, err := samplemodules.Get(samplemodules.Sample, "1.0.0")
	g.Expect(err).NotTo(HaveOccurred())
	artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), v.Module, v.Version), v.Content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.kcpClient.Create(ctx, v.Template(kcpNamespace, artifact.Links))).To(Succeed())
	g.Expect(env.kcpClient.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, v.Module, map[string]string{"regular": v.Version}))).To(Succeed())
}

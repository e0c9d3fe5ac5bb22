package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// TestUpgradePrunesDroppedResources moves a module to 2.0.0 through its
// channel: what 2.0.0 no longer has is pruned, what it adds appears.
func TestUpgradePrunesDroppedResources(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	// A channel of this test's own, so that moving it affects no other test.
	setChannel(t, samplemodules.Evolving, "upgrade", "1.0.0")

	evolving := module(samplemodules.Evolving)
	evolving.Channel = "upgrade"
	k := newKyma(t, evolving)
	k.eventuallyReady(t)
	g.Expect(k.inRuntime(&corev1.ConfigMap{}, "evolving-dropped-in-2")).To(Succeed())

	setChannel(t, samplemodules.Evolving, "upgrade", "2.0.0")
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, samplemodules.Evolving)
		g.Expect(m.Version).To(Equal("2.0.0"))
		g.Expect(m.State).To(Equal(v1beta2.StateReady))
		g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, "evolving-dropped-in-2"))).To(BeTrue(), "dropped object is pruned")
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, "evolving-added-in-2")).To(Succeed())
		cm := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(cm, "evolving-config")).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("version", "2.0.0"))
	}, timeout, interval).Should(Succeed())

	// Pointing the channel back to 1.0.0 is a downgrade: refused, and 2.0.0
	// stays installed.
	setChannel(t, samplemodules.Evolving, "upgrade", "1.0.0")
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, samplemodules.Evolving)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		g.Expect(m.Message).To(ContainSubstring("downgrade"))
		g.Expect(m.Version).To(Equal("2.0.0"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, "evolving-added-in-2")).To(Succeed())
	}, "2s", interval).Should(Succeed())
}

// TestDriftIsCorrected changes, then deletes, a managed object in the
// runtime: the operator restores each while the module is Ready, and writes
// only what drifted: the module's other object keeps its resourceVersion
// through the reconcile that corrects the drift.
func TestDriftIsCorrected(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)
	rc := k.runtime.client

	other := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(other, "evolving-dropped-in-2")).To(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, "evolving-config")).To(Succeed())
	cm.Data["version"] = "tampered"
	g.Expect(rc.Update(ctx, cm)).To(Succeed())
	restored := &corev1.ConfigMap{}
	g.Eventually(func(g Gomega) {
		g.Expect(k.inRuntime(restored, "evolving-config")).To(Succeed())
		g.Expect(restored.Data).To(HaveKeyWithValue("version", "1.0.0"))
	}, timeout, interval).Should(Succeed())
	got := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(got, "evolving-dropped-in-2")).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(other.ResourceVersion), "an object that did not drift is not written")

	g.Expect(rc.Delete(ctx, other)).To(Succeed())
	g.Eventually(func(g Gomega) {
		recreated := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(recreated, "evolving-dropped-in-2")).To(Succeed())
		g.Expect(recreated.UID).NotTo(Equal(other.UID), "a new object, created by the operator")
	}, timeout, interval).Should(Succeed())
	g.Expect(k.inRuntime(got, "evolving-config")).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(restored.ResourceVersion), "the restored object, unchanged since, is not written again")

	// Unlike the install, correcting drift is told on the Manifest.
	g.Eventually(func(g Gomega) {
		m := &v1beta2.Manifest{}
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, samplemodules.Evolving)}, m)).To(Succeed())
		g.Expect(normalEvents(g, "Manifest", m.Name, m.UID, manifest.ReasonDriftCorrected)).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
}

// TestModuleRemoval removes a module from the spec: it is uninstalled and
// its status entry goes; the other module stays.
func TestModuleRemoval(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving), module(samplemodules.Chart))
	k.eventuallyReady(t)

	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Modules = []v1beta2.Module{module(samplemodules.Chart)} })
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.Modules).To(ConsistOf(HaveField("Name", samplemodules.Chart)))
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady))
		g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, "evolving-config"))).To(BeTrue())
		g.Expect(apierrors.IsNotFound(env.kcpClient.Get(context.Background(),
			client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-evolving"}, &v1beta2.Manifest{}))).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(k.inRuntime(&corev1.ConfigMap{}, "chart-settings")).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(normalEvents(g, "Kyma", k.name, k.get(g).UID, kyma.ReasonModulesChanged)).To(ContainElement(
			HaveField("Note", "Removing 1 module: "+samplemodules.Evolving)))
	}, timeout, interval).Should(Succeed())
}

// TestKymaDeletionWaitsForBlockingCustomResources deletes a Kyma while a
// user-created custom resource of its module exists: the default CR is
// deleted by the operator, the Kyma waits and says which resource blocks,
// and finishes once the owner removes it.
func TestKymaDeletionWaitsForBlockingCustomResources(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Sample))
	k.eventuallyReady(t)

	userSample := &unstructured.Unstructured{}
	userSample.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
	userSample.SetName("users-own")
	userSample.SetNamespace(v1beta2.DefaultRuntimeNamespace)
	g.Expect(k.runtime.client.Create(ctx, userSample)).To(Succeed())

	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, samplemodules.Sample)
		g.Expect(m.State).To(Equal(v1beta2.StateDeleting))
		g.Expect(m.Message).To(ContainSubstring("Sample kyma-system/users-own"))
		defaultCR := userSample.DeepCopy()
		g.Expect(apierrors.IsNotFound(k.inRuntime(defaultCR, "default"))).To(BeTrue(), "the default CR is deleted first")
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(k.inRuntime(&appsv1.Deployment{}, "sample-manager")).To(Succeed(), "nothing is pruned while CRs block")
	}, "2s", interval).Should(Succeed())

	g.Expect(k.runtime.client.Delete(ctx, userSample)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, &v1beta2.Kyma{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(apierrors.IsNotFound(k.inRuntime(&appsv1.Deployment{}, "sample-manager"))).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

// TestIgnorePolicyCreatesNoCustomResource installs with Ignore: no default
// CR, and the module is Ready on its manager alone.
func TestIgnorePolicyCreatesNoCustomResource(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sample := module(samplemodules.Sample)
	sample.CustomResourcePolicy = v1beta2.CustomResourcePolicyIgnore
	k := newKyma(t, sample)
	k.eventuallyReady(t)

	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
	g.Consistently(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k.inRuntime(cr, "default"))).To(BeTrue())
	}, "2s", interval).Should(Succeed())
}

// TestDebugLabel checks R12: the module's debug switch labels its resources
// and pod templates; the Kyma's setting wins over the module's.
func TestDebugLabel(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sample := module(samplemodules.Sample)
	sample.Debug = ptr.To(true)
	k := newKyma(t, sample)
	k.eventuallyReady(t)

	deployment := &appsv1.Deployment{}
	g.Expect(k.inRuntime(deployment, "sample-manager")).To(Succeed())
	g.Expect(deployment.Labels).To(HaveKeyWithValue(v1beta2.DebugLabel, "true"))
	g.Expect(deployment.Spec.Template.Labels).To(HaveKeyWithValue(v1beta2.DebugLabel, "true"))

	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Debug = ptr.To(false) })
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k.inRuntime(d, "sample-manager")).To(Succeed())
		g.Expect(d.Labels).NotTo(HaveKey(v1beta2.DebugLabel))
		g.Expect(d.Spec.Template.Labels).NotTo(HaveKey(v1beta2.DebugLabel))
	}, timeout, interval).Should(Succeed())
}

// setChannel points a channel of a module's ModuleReleaseMeta at a version.
func setChannel(t *testing.T, moduleName, channel, version string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		meta := samplemodules.ReleaseMeta(kcpNamespace, moduleName, nil)
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(meta), meta)).To(Succeed())
		found := false
		for i := range meta.Spec.Channels {
			if meta.Spec.Channels[i].Channel == channel {
				meta.Spec.Channels[i].Version = version
				found = true
			}
		}
		if !found {
			meta.Spec.Channels = append(meta.Spec.Channels, v1beta2.ChannelVersionAssignment{Channel: channel, Version: version})
		}
		g.Expect(env.kcpClient.Update(context.Background(), meta)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

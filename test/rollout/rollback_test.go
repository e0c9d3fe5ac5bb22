package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// settled waits for the rollout to be Completed at version.
func settled(ro *v1beta2.ModuleRollout, version string) {
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.ToVersion).To(Equal(version))
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted), ro.Status.HaltReason)
	}, timeout, interval).Should(Succeed())
}

// manifestOf is the module's Manifest of a Kyma.
func manifestOf(g Gomega, kymaName, module string) *v1beta2.Manifest {
	m := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(kymaName, module)}, m)).To(Succeed())
	return m
}

// A finished rollout rolled back: the runtimes go back to 1.0.0 in waves,
// canaries first, never more than maxInFlight at once, although the
// channel still points to 2.0.0; the runtimes get 1.0.0's objects back,
// and the Manifests carry the content the rollback pinned.
func TestRollbackReturnsTheFleetInWaves(t *testing.T) {
	RegisterTestingT(t)
	const module = "larder"
	publish(t, module, "1.0.0", configMap(module, "1.0.0"))
	publish(t, module, "2.0.0", configMap(module, "2.0.0"), func(mt *v1beta2.ModuleTemplate) { mt.Spec.RollbackTo = []string{"1.0.x"} })
	offer(t, module)
	names := newFleet(t, "larder", module, 8, 1, 6)
	eventuallyAt(names, module, "1.0.0")
	ro := newRollout(t, module)
	moveChannel(t, module)
	eventuallyAt(names, module, "2.0.0")
	settled(ro, "2.0.0")

	tr := record(t, module, "1.0.0")
	patch := client.MergeFrom(ro.DeepCopy())
	ro.Spec.Rollback = "test: 2.0.0 loses events"
	Expect(env.kcpClient.Patch(context.Background(), ro, patch)).To(Succeed())
	eventuallyAt(names, module, "1.0.0")
	settled(ro, "1.0.0")
	Expect(ro.Status.FromVersion).To(Equal("2.0.0"))
	Expect(ro.Status.Rollback).NotTo(BeNil())
	Expect(ro.Status.Rollback.By).To(Equal("test: 2.0.0 loses events"))
	Expect(ro.Status.Rollback.Of).To(Equal("2.0.0"))
	Expect(ro.Status.Rollback.Refused).To(BeEmpty())
	Expect(conditionMessage(ro, "Ready")).To(ContainSubstring("Rolled back from 2.0.0 to 1.0.0"))

	asked, maxInFlight := tr.Order()
	Expect(asked).To(HaveLen(8))
	Expect(asked[:2]).To(ConsistOf(names[1], names[6]), "the canaries go back first")
	Expect(maxInFlight).To(BeNumerically("<=", 5))
	Expect(ro.Status.Content).NotTo(BeEmpty(), "the rollback pinned 1.0.0's content")
	for _, name := range names {
		Expect(manifestOf(Default, name, module).Spec.Resources).To(Equal(ro.Status.Content), name)
		cm := &corev1.ConfigMap{}
		Expect(env.rtClient.Get(context.Background(), client.ObjectKey{Namespace: name, Name: module}, cm)).To(Succeed())
		Expect(cm.Data["version"]).To(Equal("1.0.0"), "the runtime has 1.0.0's objects again")
	}
	releaseMeta := &v1beta2.ModuleReleaseMeta{}
	Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: module}, releaseMeta)).To(Succeed())
	Expect(releaseMeta.Spec.Channels[0].Version).To(Equal("2.0.0"), "the channel was not touched")
	Consistently(func(g Gomega) {
		g.Expect(manifestOf(g, names[3], module).Spec.Version).To(Equal("1.0.0"))
	}, 2*time.Second, interval).Should(Succeed(), "the fleet stays rolled back while the channel points to 2.0.0")
}

// A version that lists no rollbackTo is never rolled back: the rollback
// is refused with the reason, and no runtime moves.
func TestRollbackOfAnUndeclaredVersionIsRefused(t *testing.T) {
	RegisterTestingT(t)
	const module = "scullery"
	publishModule(t, module, configMap(module, "2.0.0"))
	names := newFleet(t, "scullery", module, 3, 0)
	eventuallyAt(names, module, "1.0.0")
	ro := newRollout(t, module)
	moveChannel(t, module)
	eventuallyAt(names, module, "2.0.0")
	settled(ro, "2.0.0")

	patch := client.MergeFrom(ro.DeepCopy())
	ro.Spec.Rollback = "test: please"
	Expect(env.kcpClient.Patch(context.Background(), ro, patch)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Rollback).NotTo(BeNil())
		g.Expect(ro.Status.Rollback.Refused).To(ContainSubstring("2.0.0 does not list 1.0.0 in its ModuleTemplate's spec.rollbackTo"))
	}, timeout, interval).Should(Succeed())
	Expect(ro.Status.ToVersion).To(Equal("2.0.0"))
	Consistently(func(g Gomega) {
		for _, name := range names {
			g.Expect(manifestOf(g, name, module).Spec.Version).To(Equal("2.0.0"), name)
		}
	}, 2*time.Second, interval).Should(Succeed())
}

// A mandatory module has no channel: a ModuleRollout without one rolls out
// its ModuleReleaseMeta's mandatory.version, canary first.
func TestMandatoryModuleRollsOutInWaves(t *testing.T) {
	RegisterTestingT(t)
	const module = "boiler"
	publish(t, module, "1.0.0", configMap(module, "1.0.0"))
	publish(t, module, "2.0.0", configMap(module, "2.0.0"))
	releaseMeta := &v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Name: module, Namespace: kcpNamespace},
		Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: module, Mandatory: &v1beta2.Mandatory{Version: "1.0.0"}},
	}
	Expect(env.kcpClient.Create(context.Background(), releaseMeta)).To(Succeed())
	t.Cleanup(func() {
		Expect(client.IgnoreNotFound(env.kcpClient.Delete(context.Background(), releaseMeta))).To(Succeed())
	})
	names := newFleet(t, "boiler", "", 6, 4)
	eventuallyAt(names, module, "1.0.0")

	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-mandatory", Namespace: kcpNamespace},
		Spec: v1beta2.ModuleRolloutSpec{
			ModuleName:  module,
			Canary:      &v1beta2.RolloutCanary{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{canaryLabel: "true"}}, Count: intstr.FromInt32(1)},
			MaxInFlight: intstr.FromInt32(2),
		},
	}
	Expect(env.kcpClient.Create(context.Background(), ro)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), ro) })
	settled(ro, "1.0.0")
	Expect(ro.Status.Total).To(Equal(int32(6)), "every runtime has the mandatory module")

	tr := record(t, module, "2.0.0")
	patch := client.MergeFrom(releaseMeta.DeepCopy())
	releaseMeta.Spec.Mandatory.Version = "2.0.0"
	Expect(env.kcpClient.Patch(context.Background(), releaseMeta, patch)).To(Succeed())
	eventuallyAt(names, module, "2.0.0")
	settled(ro, "2.0.0")
	asked, maxInFlight := tr.Order()
	Expect(asked).To(HaveLen(6))
	Expect(asked[0]).To(Equal(names[4]), "the canary first")
	Expect(maxInFlight).To(BeNumerically("<=", 2))
}

// The rollout pins its version's content at its start: a tag pushed again
// mid-rollout halts it with the reason, the canary keeps the pinned bytes,
// and no other runtime moves.
func TestMovedTagHaltsTheRollout(t *testing.T) {
	RegisterTestingT(t)
	const module = "cellar"
	ctx := context.Background()
	publish(t, module, "1.0.0", configMap(module, "1.0.0"))
	tag := fmt.Sprintf("%s/modules/%s:2.0.0", env.registry.Host(), module)
	push := func(content string) string {
		artifact, err := ociartifact.Push(ctx, tag, ociartifact.Module{RawManifest: []byte(content)}.Layers(), ociartifact.Insecure())
		Expect(err).NotTo(HaveOccurred())
		return artifact.Links[v1beta2.RawManifestResourceName]
	}
	first := push(configMap(module, "2.0.0"))
	template := samplemodules.Version{Module: module, Version: "2.0.0"}.Template(kcpNamespace, map[string]string{v1beta2.RawManifestResourceName: "oci://" + tag})
	Expect(env.kcpClient.Create(ctx, template)).To(Succeed())
	t.Cleanup(func() { Expect(client.IgnoreNotFound(env.kcpClient.Delete(ctx, template))).To(Succeed()) })
	offer(t, module)
	names := newFleet(t, "cellar", module, 5, 2)
	eventuallyAt(names, module, "1.0.0")
	ro := newRollout(t, module)
	patch := client.MergeFrom(ro.DeepCopy())
	ro.Spec.SoakTime = metav1.Duration{Duration: time.Hour} // of the operator's clock, which the test does not move
	ro.Spec.Canary.Count = intstr.FromInt32(1)
	Expect(env.kcpClient.Patch(ctx, ro, patch)).To(Succeed())

	moveChannel(t, module)
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Done).To(Equal(int32(1)))
		g.Expect(ro.Status.WaveReadyAt).NotTo(BeNil(), "the canary soaks")
	}, timeout, interval).Should(Succeed())
	Expect(ro.Status.Content).To(Equal([]v1beta2.ContentResource{{Name: v1beta2.RawManifestResourceName, Link: first}}), "pinned at the start")
	Expect(manifestOf(Default, names[2], module).Spec.Resources).To(Equal(ro.Status.Content), "the canary got the pinned bytes")

	second := push(configMap(module, "2.0.0-again"))
	Expect(second).NotTo(Equal(first))
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutHalted))
		g.Expect(ro.Status.HaltReason).To(ContainSubstring("rawManifest now resolves to " + second + ", the rollout pinned " + first))
	}, timeout, interval).Should(Succeed())
	Expect(ro.Status.Content[0].Link).To(Equal(first))
	for i, name := range names {
		if i == 2 {
			continue
		}
		Expect(manifestOf(Default, name, module).Spec.Version).To(Equal("1.0.0"), name)
	}
}

// conditionMessage is the message of the rollout's condition.
func conditionMessage(ro *v1beta2.ModuleRollout, condition string) string {
	for _, c := range ro.Status.Conditions {
		if c.Type == condition {
			return c.Message
		}
	}
	return ""
}

// A paused runtime cannot move: the rollout lists it pending with the
// reason, moves the others, never counts it failed, and takes it along
// once it is no longer paused.
func TestPausedRuntimeIsPendingWithItsReason(t *testing.T) {
	RegisterTestingT(t)
	const module = "attic"
	ctx := context.Background()
	publishModule(t, module, configMap(module, "2.0.0"))
	names := newFleet(t, "attic", module, 4)
	eventuallyAt(names, module, "1.0.0")
	ro := newRollout(t, module)
	patch := client.MergeFrom(ro.DeepCopy())
	ro.Spec.Canary = nil
	Expect(env.kcpClient.Patch(ctx, ro, patch)).To(Succeed())
	setPaused := func(paused bool) {
		k := &v1beta2.Kyma{}
		Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: names[1]}, k)).To(Succeed())
		patch := client.MergeFrom(k.DeepCopy())
		if paused {
			k.SetLabels(map[string]string{v1beta2.SkipReconciliationLabel: "true"})
		} else {
			delete(k.Labels, v1beta2.SkipReconciliationLabel)
		}
		Expect(env.kcpClient.Patch(ctx, k, patch)).To(Succeed())
	}
	setPaused(true)

	moveChannel(t, module)
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Done).To(Equal(int32(3)))
		g.Expect(ro.Status.Runtimes.Pending).To(ConsistOf(And(HaveField("Kyma", names[1]), HaveField("Reason", ContainSubstring("paused")))))
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutProgressing))
		g.Expect(ro.Status.FailedCount).To(BeZero())
		g.Expect(conditionMessage(ro, "Reconciling")).To(ContainSubstring("waiting for runtimes that cannot move now, such as " + names[1]))
	}, timeout, interval).Should(Succeed())
	Expect(manifestOf(Default, names[1], module).Spec.Version).To(Equal("1.0.0"))

	setPaused(false)
	eventuallyAt(names, module, "2.0.0")
	settled(ro, "2.0.0")
}

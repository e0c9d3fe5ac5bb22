package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	lmrollout "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/rollout"
	"github.com/runtime-fleet/lifecycle-manager/internal/testrollout"
)

const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

const canaryLabel = "rollout.lifecycle-manager/canary"

func configMap(name, version string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  version: %q\n", name, version)
}

// newFleet registers n Kymas on the runtime, each in a sync namespace of its
// own, with the module on channel regular (none when module is empty: a
// mandatory module needs no entry); the Kymas at the given indexes are
// labelled as canaries.
func newFleet(t *testing.T, prefix, module string, n int, canaries ...int) []string {
	t.Helper()
	ctx := context.Background()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		names = append(names, name)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
			Data:       map[string][]byte{"config": env.runtime.Kubeconfig()},
		}
		labels := map[string]string{}
		if slices.Contains(canaries, i) {
			labels[canaryLabel] = "true"
		}
		k := &v1beta2.Kyma{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: labels},
			Spec:       v1beta2.KymaSpec{Channel: "regular", SyncNamespace: name},
		}
		if module != "" {
			k.Spec.Modules = []v1beta2.Module{{Name: module, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete}}
		}
		Expect(env.kcpClient.Create(ctx, secret)).To(Succeed())
		Expect(env.kcpClient.Create(ctx, k)).To(Succeed())
		t.Cleanup(func() {
			_ = env.kcpClient.Delete(ctx, k)
			Eventually(func() bool {
				return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(k), &v1beta2.Kyma{}))
			}, timeout, interval).Should(BeTrue())
			_ = env.kcpClient.Delete(ctx, secret)
		})
	}
	return names
}

// eventuallyAt waits until every Kyma shows the module Ready at version.
func eventuallyAt(names []string, module, version string) {
	Eventually(func(g Gomega) {
		for _, name := range names {
			k := &v1beta2.Kyma{}
			g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
			var found bool
			for _, m := range k.Status.Modules {
				if m.Name == module {
					found = true
					g.Expect(m.State).To(Equal(v1beta2.StateReady), "%s: %s", name, m.Message)
					g.Expect(m.Version).To(Equal(version), name)
				}
			}
			g.Expect(found).To(BeTrue(), name)
		}
	}, timeout, interval).Should(Succeed())
}

// record traces the module's Manifests towards version until the test
// ends (testrollout.Trace).
func record(t *testing.T, module, version string) *testrollout.Trace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr, err := testrollout.Record(ctx, env.kcpClient, kcpNamespace, module, version)
	Expect(err).NotTo(HaveOccurred())
	return tr
}

func newRollout(t *testing.T, module string) *v1beta2.ModuleRollout {
	t.Helper()
	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-regular", Namespace: kcpNamespace},
		Spec: v1beta2.ModuleRolloutSpec{
			ModuleName: module, Channel: "regular",
			Canary:      &v1beta2.RolloutCanary{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{canaryLabel: "true"}}, Count: intstr.FromInt32(2)},
			MaxInFlight: intstr.FromInt32(5),
			MaxFailures: intstr.FromInt32(0),
		},
	}
	Expect(env.kcpClient.Create(context.Background(), ro)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), ro) })
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.ToVersion).To(Equal("1.0.0"))
	}, timeout, interval).Should(Succeed())
	return ro
}

// moveChannel points channel regular of module at 2.0.0.
func moveChannel(t *testing.T, module string) {
	t.Helper()
	meta := &v1beta2.ModuleReleaseMeta{}
	Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: module}, meta)).To(Succeed())
	meta.Spec.Channels = []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "2.0.0"}}
	Expect(env.kcpClient.Update(context.Background(), meta)).To(Succeed())
}

func publishModule(t *testing.T, module string, v2Content string) {
	t.Helper()
	publish(t, module, "1.0.0", configMap(module, "1.0.0"))
	publish(t, module, "2.0.0", v2Content)
	offer(t, module)
}

// 20 runtimes, a canary of 2 chosen by label, then waves of at most 5: the
// Manifests are asked for the new version canaries first, never more than
// 5 at once, and every runtime ends at it; while they wait, the Kymas say
// so.
func TestFleetMovesInWaves(t *testing.T) {
	RegisterTestingT(t)
	const module = "shop"
	publishModule(t, module, configMap(module, "2.0.0"))
	names := newFleet(t, "shop", module, 20, 4, 9)
	eventuallyAt(names, module, "1.0.0")
	newRollout(t, module)

	tr := record(t, module, "2.0.0")
	moveChannel(t, module)
	Eventually(func(g Gomega) {
		k := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: names[19]}, k)).To(Succeed())
		g.Expect(k.Status.Modules).To(ContainElement(HaveField("Message", ContainSubstring("Version 2.0.0 waits for"))))
	}, timeout, interval).Should(Succeed(), "a Kyma waiting for its wave says so")
	eventuallyAt(names, module, "2.0.0")

	asked, maxInFlight := tr.Order()
	Expect(asked).To(HaveLen(20))
	Expect(asked[:2]).To(ConsistOf(names[4], names[9]), "the canaries first")
	Expect(maxInFlight).To(BeNumerically("<=", 5), "never more than maxInFlight at once")
	ro := &v1beta2.ModuleRollout{}
	Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: module + "-regular"}, ro)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.Done).To(Equal(int32(20)))
		g.Expect(ro.Status.Wave).To(Equal(int32(4)), "canary and four waves")
	}, timeout, interval).Should(Succeed())
}

// A canary that fails halts the rollout: no other runtime is asked for the
// new version, and the rollout names the failing runtime. The halt holds
// after the canaries recover, until it is resumed. Here a runtime
// owner's ConfigMap stands where 2.0.0 wants its own in one canary's
// namespace, which the module never takes over.
func TestFailingCanaryHaltsTheRollout(t *testing.T) {
	RegisterTestingT(t)
	const module = "pantry"
	publishModule(t, module, configMap(module, "2.0.0")+"---\n"+configMap("pantry-extra", "2.0.0"))
	names := newFleet(t, "pantry", module, 8, 2, 5)
	eventuallyAt(names, module, "1.0.0")
	ro := newRollout(t, module)
	for _, canary := range []string{names[2], names[5]} {
		owners := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pantry-extra", Namespace: canary}}
		Expect(env.rtClient.Create(context.Background(), owners)).To(Succeed())
		// The owner's, not the module's: removing the module leaves it.
		t.Cleanup(func() { Expect(client.IgnoreNotFound(env.rtClient.Delete(context.Background(), owners))).To(Succeed()) })
	}

	tr := record(t, module, "2.0.0")
	moveChannel(t, module)
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutHalted))
		g.Expect(ro.Status.Failed).To(ConsistOf(names[2], names[5]))
		g.Expect(ro.Status.HaltReason).To(ContainSubstring("2 of 8 runtimes failed at 2.0.0"))
		stalled := meta.FindStatusCondition(ro.Status.Conditions, "Stalled")
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	// Consistently: the halt holds, and nobody else moves.
	Consistently(func(g Gomega) {
		asked, _ := tr.Order()
		g.Expect(asked).To(ConsistOf(names[2], names[5]))
	}, 3*time.Second, interval).Should(Succeed())
	for _, name := range names {
		if name == names[2] || name == names[5] {
			continue
		}
		m := &v1beta2.Manifest{}
		Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(name, module)}, m)).To(Succeed())
		Expect(m.Spec.Version).To(Equal("1.0.0"), name)
	}

	// The canaries recover (their owners' ConfigMaps go): the halt holds
	// until someone resumes it, and the status says who did.
	for _, canary := range []string{names[2], names[5]} {
		Expect(env.rtClient.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pantry-extra", Namespace: canary}})).To(Succeed())
	}
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Failed).To(BeEmpty(), "the canaries recovered")
		g.Expect(ro.Status.Done).To(Equal(int32(2)))
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutHalted), "a halt is sticky")
	}, timeout, interval).Should(Succeed())
	asked, _ := tr.Order()
	Expect(asked).To(ConsistOf(names[2], names[5]), "nobody else moved while halted")

	Expect(lmrollout.Resume(context.Background(), env.kcpClient, kcpNamespace, ro.Name, "test: the owners' ConfigMaps are gone")).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.ResumedBy).To(Equal("test: the owners' ConfigMaps are gone"))
		g.Expect(ro.Status.ResumedAt).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	eventuallyAt(names, module, "2.0.0")
}

// Pausing holds the next wave; resuming continues with it.
func TestPauseAndResume(t *testing.T) {
	RegisterTestingT(t)
	const module = "bakery"
	publishModule(t, module, configMap(module, "2.0.0"))
	names := newFleet(t, "bakery", module, 8, 0, 1)
	eventuallyAt(names, module, "1.0.0")
	ro := newRollout(t, module)
	Expect(env.kcpClient.Patch(context.Background(), ro, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":true}}`)))).To(Succeed())

	tr := record(t, module, "2.0.0")
	moveChannel(t, module)
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutPaused))
		g.Expect(ro.Status.ToVersion).To(Equal("2.0.0"))
	}, timeout, interval).Should(Succeed())
	Consistently(func(g Gomega) {
		asked, _ := tr.Order()
		g.Expect(asked).To(BeEmpty(), "paused before the canary: nobody moves")
	}, 3*time.Second, interval).Should(Succeed())

	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		ro.Spec.Paused = false
		g.Expect(env.kcpClient.Update(context.Background(), ro)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	eventuallyAt(names, module, "2.0.0")
	asked, _ := tr.Order()
	Expect(asked[:2]).To(ConsistOf(names[0], names[1]))
}

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testrollout"
)

// relay is a module of this test alone: one ConfigMap in 1.0.0; 2.0.0
// adds a default custom resource of a gated kind (modules_test.go), which
// is Ready only once the test opens relay's gate, so that a wave stays in
// flight for as long as the test needs. The kind's CRD is the runtime's,
// created by the test: the Kymas share the runtime, and a CRD in the
// module's content would be the first Kyma's alone.
const relay = "relay"

var relayCRD = gatedCRD("gatedrelays", "GatedRelay", "gatedrelay")

func publishRelay(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crd := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(relayCRD), &crd.Object)).To(Succeed())
	rt := env.runtimes[mainRuntime].client
	if err := rt.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(func() error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(gatedGroup + "/v1")
		list.SetKind("GatedRelayList")
		return rt.List(ctx, list)
	}, timeout, interval).Should(Succeed(), "the CRD is served")
	for _, version := range []string{"1.0.0", "2.0.0"} {
		v := samplemodules.Version{Module: relay, Version: version, Content: ociartifact.Module{RawManifest: fmt.Appendf(nil,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: relay-config\ndata:\n  version: %q\n", version)}}
		if version == "2.0.0" {
			v.DefaultCR = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": gatedGroup + "/v1", "kind": "GatedRelay", "metadata": map[string]any{"name": relay},
			}}
		}
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), relay, version), v.Content.Layers(), ociartifact.Insecure())
		Expect(err).NotTo(HaveOccurred())
		Expect(env.kcpClient.Create(ctx, v.Template(kcpNamespace, artifact.Links))).To(Succeed())
	}
	Expect(env.kcpClient.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, relay, map[string]string{"regular": "1.0.0"}))).To(Succeed())
}

// relayFleet registers n Kymas with relay on the main runtime, each in a
// sync namespace of its own.
func relayFleet(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	var names []string
	for i := range n {
		name := fmt.Sprintf("relay-%d", i)
		names = append(names, name)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
			Data:       map[string][]byte{"config": env.runtimes[mainRuntime].cluster.Kubeconfig()},
		}
		k := &v1beta2.Kyma{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace},
			Spec: v1beta2.KymaSpec{Channel: "regular", SyncNamespace: name, Modules: []v1beta2.Module{
				{Name: relay, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete},
			}},
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

// TestOperatorKilledMidRollout kills the operator with SIGKILL twice
// during a rollout, and starts a new process each time: while the canary
// is in flight (its module not Ready yet), and while wave 1 soaks. Each
// time the rollout goes on in place: the same rollout, the same wave with
// the same runtimes and the same pinned content, no canary chosen again,
// no runtime asked twice, and never more than maxInFlight moving at once,
// across the restarts.
func TestOperatorKilledMidRollout(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	ctx := context.Background()
	env.gates.set(false, relay)
	t.Cleanup(func() { env.gates.set(true, relay) }) // the Kymas' removal needs relay's operator
	publishRelay(t)
	names := relayFleet(t, 6)
	Eventually(func(g Gomega) {
		for _, name := range names {
			m := &v1beta2.Manifest{}
			g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name + "-" + relay}, m)).To(Succeed())
			g.Expect(m.Status.State).To(Equal(v1beta2.StateReady), name)
		}
	}, timeout, interval).Should(Succeed())

	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "relay-regular", Namespace: kcpNamespace},
		Spec: v1beta2.ModuleRolloutSpec{ModuleName: relay, Channel: "regular",
			Canary: &v1beta2.RolloutCanary{Count: intstr.FromInt32(1)}, MaxInFlight: intstr.FromInt32(2),
			SoakTime: metav1.Duration{Duration: 10 * time.Second}},
	}
	Expect(env.kcpClient.Create(ctx, ro)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, ro) })
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
	}, timeout, interval).Should(Succeed())

	tr := traceRelay(t)
	asked := func() []string { a, _ := tr.Order(); return a }
	meta := &v1beta2.ModuleReleaseMeta{}
	Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: relay}, meta)).To(Succeed())
	meta.Spec.Channels = []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "2.0.0"}}
	Expect(env.kcpClient.Update(ctx, meta)).To(Succeed())

	// The canary is in flight, its module Processing (relay's gate is
	// shut): kill the operator there.
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Wave).To(Equal(int32(0)))
		g.Expect(ro.Status.InFlight).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())
	Eventually(asked, timeout, interval).Should(Equal(ro.Status.InFlight), "the canary was asked for 2.0.0")
	midWave := ro.Status.DeepCopy()
	Expect(midWave.Content).NotTo(BeEmpty())
	killOperator(t)
	Expect(env.operator.start()).To(Succeed())
	// The new process plans again (a status it writes is newer than the
	// kill) and keeps the wave as it was.
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.PlannedAt.Time).To(BeTemporally(">", midWave.PlannedAt.Time))
	}, timeout, interval).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Wave).To(Equal(int32(0)), "the same wave")
		g.Expect(ro.Status.InFlight).To(Equal(midWave.InFlight), "with the same runtime")
		g.Expect(ro.Status.WaveStartedAt.Time).To(BeTemporally("==", midWave.WaveStartedAt.Time))
		g.Expect(ro.Status.Content).To(Equal(midWave.Content), "and the same pinned content")
		g.Expect(asked()).To(Equal(midWave.InFlight), "nobody else moved")
	}, 3*time.Second, interval).Should(Succeed())

	// The canary becomes Ready; wave 1 Ready, soaking: kill the operator
	// there.
	env.gates.set(true, relay)
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Wave).To(Equal(int32(1)))
		g.Expect(ro.Status.InFlight).To(BeEmpty())
		g.Expect(ro.Status.WaveReadyAt).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	Eventually(asked, timeout, interval).Should(HaveLen(3), "the canary and wave 1")
	before := asked()
	killOperator(t)
	Expect(env.operator.start()).To(Succeed())

	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.Done).To(Equal(int32(6)))
	}, timeout, interval).Should(Succeed())
	Expect(ro.Status.StartedAt.Time).To(BeTemporally("==", midWave.StartedAt.Time), "the same rollout, not a new one")
	Expect(ro.Status.Wave).To(Equal(int32(3)), "canary, then waves 1 to 3 of at most 2: no wave repeated")
	after, maxInFlight := tr.Order()
	Expect(after).To(HaveLen(6))
	Expect(after[:3]).To(Equal(before), "the runtimes of the waves before the kill were not asked again")
	Expect(maxInFlight).To(BeNumerically("<=", 2))
}

// traceRelay traces relay's Manifests towards 2.0.0 until the test ends.
func traceRelay(t *testing.T) *testrollout.Trace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watching, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	tr, err := testrollout.Record(ctx, watching, kcpNamespace, relay, "2.0.0")
	Expect(err).NotTo(HaveOccurred())
	return tr
}

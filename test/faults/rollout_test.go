package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// relay is a module of this test alone: one ConfigMap, versions 1.0.0 and
// 2.0.0.
const relay = "relay"

func publishRelay(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, version := range []string{"1.0.0", "2.0.0"} {
		v := samplemodules.Version{Module: relay, Version: version, Content: ociartifact.Module{RawManifest: fmt.Appendf(nil,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: relay-config\ndata:\n  version: %q\n", version)}}
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

// TestOperatorKilledMidRollout kills the operator with SIGKILL while a
// rollout soaks after its first wave and starts a new process: the rollout
// goes on from the wave it was in (the same rollout, not a new canary), and
// never more than maxInFlight runtimes move at once, across the restart.
func TestOperatorKilledMidRollout(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	ctx := context.Background()
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

	asked := recordAsked(t)
	meta := &v1beta2.ModuleReleaseMeta{}
	Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: relay}, meta)).To(Succeed())
	meta.Spec.Channels = []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "2.0.0"}}
	Expect(env.kcpClient.Update(ctx, meta)).To(Succeed())

	// Wave 1 Ready, soaking: kill the operator there.
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Wave).To(Equal(int32(1)))
		g.Expect(ro.Status.InFlight).To(BeEmpty())
		g.Expect(ro.Status.WaveReadyAt).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	started := ro.Status.StartedAt.DeepCopy()
	Eventually(asked.names, timeout, interval).Should(HaveLen(3), "the canary and wave 1")
	before := asked.names()
	killOperator(t)
	Expect(env.operator.start()).To(Succeed())

	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.Done).To(Equal(int32(6)))
	}, timeout, interval).Should(Succeed())
	Expect(ro.Status.StartedAt.Time).To(BeTemporally("==", started.Time), "the same rollout, not a new one")
	Expect(ro.Status.Wave).To(Equal(int32(3)), "canary, then waves 1 to 3 of at most 2: no wave repeated")
	after := asked.names()
	Expect(after).To(HaveLen(6))
	Expect(after[:3]).To(Equal(before), "the runtimes of the waves before the kill were not asked again")
	Expect(asked.maxInFlight()).To(BeNumerically("<=", 2))
}

// askedRecorder records, from a watch of relay's Manifests, the order in
// which Kymas were asked for 2.0.0 and how many were on the way at once.
type askedRecorder struct {
	mu       sync.Mutex
	order    []string
	inFlight map[string]bool
	peak     int
}

func recordAsked(t *testing.T) *askedRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watching, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := watching.Watch(ctx, &v1beta2.ManifestList{}, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.ModuleNameLabel: relay})
	Expect(err).NotTo(HaveOccurred())
	r := &askedRecorder{inFlight: map[string]bool{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1beta2.Manifest)
			if !ok || ev.Type == watch.Deleted || m.Spec.Version != "2.0.0" {
				continue
			}
			name := m.Labels[v1beta2.KymaNameLabel]
			ready := m.Status.State == v1beta2.StateReady && m.Status.ObservedGeneration == m.Generation
			r.mu.Lock()
			if !slices.Contains(r.order, name) {
				r.order = append(r.order, name)
				r.inFlight[name] = true
			}
			if ready {
				delete(r.inFlight, name)
			}
			r.peak = max(r.peak, len(r.inFlight))
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *askedRecorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

func (r *askedRecorder) maxInFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak
}

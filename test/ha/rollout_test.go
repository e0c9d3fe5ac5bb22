package ha

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// rolloutChannel is this test's own channel of the evolving module, so that
// moving it touches no other test's Kymas.
const rolloutChannel = "harollout"

// TestShardedRolloutHoldsWithoutItsPlannerAndMovesWithIt runs a rollout
// across two shards (SPEC G1, G8; issue 29). The planner is shard 0's
// leader, reading the whole fleet. While it is down, shard 1 holds its
// Kymas at the installed version and says why (fails closed; before, the
// sharded Kyma controllers ignored rollouts and moved every runtime at
// once). Once shard 0 is back, the rollout moves the Kymas of both shards,
// never more than maxInFlight at a time, to the end.
func TestShardedRolloutHoldsWithoutItsPlannerAndMovesWithIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	publishEvolving(t, "2.0.0")
	setChannel(t, "1.0.0")

	var staleID string
	g.Eventually(func(g Gomega) { staleID = leaseHolder(g, 0) }, timeout, interval).Should(Succeed())
	zero := startShard(t, "rollout-shard-0", 0)
	t.Cleanup(func() {
		// On failure, what the planner's process said about rollouts,
		// leadership and errors (the shared tail shows only 30 lines).
		if !t.Failed() {
			return
		}
		data, _ := zero.cmd.Log()
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "rollout") || strings.Contains(line, "error") || strings.Contains(line, "Starting") || strings.Contains(line, "leader") {
				t.Log(line[:min(len(line), 300)])
			}
		}
	})
	startShard(t, "rollout-shard-1", 1)
	g.Eventually(func(g Gomega) {
		g.Expect(leaseHeld(g, 0)).NotTo(Equal(staleID), "shard 0's Lease is still held by a process of an earlier run")
	}, timeout, interval).Should(Succeed())

	names := kymaNames(runtimeCount / shards)
	all := append(append([]string{}, names[0]...), names[1]...)
	for i, name := range all {
		createRolloutKyma(t, name, env.runtimes[i])
	}
	for _, name := range all {
		eventuallyReady(g, name)
	}
	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: samplemodules.Evolving + "-" + rolloutChannel, Namespace: kcpNamespace},
		Spec: v1beta2.ModuleRolloutSpec{
			ModuleName: samplemodules.Evolving, Channel: rolloutChannel,
			MaxInFlight: intstr.FromInt32(1),
		},
	}
	g.Expect(env.kcpClient.Create(ctx, ro)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), ro) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.ToVersion).To(Equal("1.0.0"))
		g.Expect(ro.Status.Total).To(Equal(int32(len(all))), "the planner counts the Kymas of both shards")
	}, timeout, interval).Should(Succeed(), "the planner's first plan")

	// No planner: shard 1 holds.
	g.Expect(zero.cmd.Kill()).To(Succeed())
	setChannel(t, "2.0.0")
	for _, name := range names[1] {
		g.Eventually(func(g Gomega) {
			k := &v1beta2.Kyma{}
			g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
			g.Expect(k.Status.Modules).To(ContainElement(And(
				HaveField("Name", samplemodules.Evolving),
				HaveField("Message", ContainSubstring("waits for ModuleRollout "+ro.Name)))))
		}, timeout, interval).Should(Succeed(), "shard 1 says why %s does not move", name)
		g.Expect(manifestVersion(g, name)).To(Equal("1.0.0"), "%s moved without its planner", name)
	}

	// The planner is back: the rollout moves both shards, one at a time.
	startShard(t, "rollout-shard-0-again", 0)
	maxInFlight := 0
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		maxInFlight = max(maxInFlight, len(ro.Status.InFlight))
		g.Expect(ro.Status.ToVersion).To(Equal("2.0.0"))
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		for _, name := range all {
			g.Expect(manifestVersion(g, name)).To(Equal("2.0.0"), name)
		}
	}, 2*timeout, interval).Should(Succeed())
	g.Expect(maxInFlight).To(BeNumerically("<=", 1), "never more than maxInFlight in flight across the shards")
	readyThenDeleted(g, all)
}

// readyThenDeleted waits until the Kymas are Ready, then deletes them and
// waits until they are gone, while the test's shards still run (its
// cleanups would stop the processes first).
func readyThenDeleted(g Gomega, names []string) {
	ctx := context.Background()
	for _, name := range names {
		eventuallyReady(g, name)
	}
	for _, name := range names {
		g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace}})).To(Succeed())
	}
	for _, name := range names {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, &v1beta2.Kyma{}))
		}, timeout, interval).Should(BeTrue(), "Kyma %s was not deleted", name)
	}
}

// publishEvolving pushes a version of the evolving module and its template,
// once per test binary run.
func publishEvolving(t *testing.T, version string) {
	t.Helper()
	g := NewWithT(t)
	v, err := samplemodules.Get(samplemodules.Evolving, version)
	g.Expect(err).NotTo(HaveOccurred())
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), v.Module, v.Version), v.Content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	if err := env.kcpClient.Create(context.Background(), v.Template(kcpNamespace, artifact.Links)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// setChannel points the test's channel of the evolving module at version;
// the channel goes at the end of the test.
func setChannel(t *testing.T, version string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		meta := &v1beta2.ModuleReleaseMeta{}
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: samplemodules.Evolving}, meta)).To(Succeed())
		channels := meta.Spec.Channels[:0]
		for _, c := range meta.Spec.Channels {
			if c.Channel != rolloutChannel {
				channels = append(channels, c)
			}
		}
		channels = append(channels, v1beta2.ChannelVersionAssignment{Channel: rolloutChannel, Version: version})
		meta.Spec.Channels = channels
		g.Expect(env.kcpClient.Update(ctx, meta)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	t.Cleanup(func() {
		meta := &v1beta2.ModuleReleaseMeta{}
		if env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: samplemodules.Evolving}, meta) != nil {
			return
		}
		channels := meta.Spec.Channels[:0]
		for _, c := range meta.Spec.Channels {
			if c.Channel != rolloutChannel {
				channels = append(channels, c)
			}
		}
		meta.Spec.Channels = channels
		_ = env.kcpClient.Update(context.Background(), meta)
	})
}

// createRolloutKyma registers a runtime under a Kyma that has the evolving
// module through the test's channel.
func createRolloutKyma(t *testing.T, name string, rt interface{ Kubeconfig() []byte }) {
	t.Helper()
	registerKyma(t, rt, &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: name}},
		Spec: v1beta2.KymaSpec{Channel: "regular", Modules: []v1beta2.Module{{
			Name: samplemodules.Evolving, Channel: rolloutChannel, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
		}}},
	})
}

// registerKyma creates k and the kubeconfig Secret of its runtime rt. The
// test deletes the Kyma while its shards run; the cleanup only removes
// what a failed test left.
func registerKyma(t *testing.T, rt interface{ Kubeconfig() []byte }, k *v1beta2.Kyma) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: k.Name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: k.Name}},
		Data:       map[string][]byte{"config": rt.Kubeconfig()},
	}
	g.Expect(env.kcpClient.Create(ctx, secret)).To(Succeed())
	g.Expect(env.kcpClient.Create(ctx, k)).To(Succeed())
	t.Cleanup(func() {
		_ = env.kcpClient.Delete(context.Background(), k)
		_ = env.kcpClient.Delete(context.Background(), secret)
	})
}

func manifestVersion(g Gomega, kymaName string) string {
	return versionOf(g, kymaName, samplemodules.Evolving)
}

// versionOf is the version a Kyma's Manifest of module asks for.
func versionOf(g Gomega, kymaName, module string) string {
	m := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(kymaName, module)}, m)).To(Succeed())
	return m.Spec.Version
}

package ha

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	lmrollout "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/rollout"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testrollout"
)

// beacon is this test's own module: two versions of one ConfigMap, 2.0.0
// declaring that it may go back to 1.0.x.
const (
	beacon        = "beacon"
	threeShards   = 3
	beaconCanary  = "rollout.lifecycle-manager/beacon-canary"
	errorRatio    = "beacon_error_ratio"
	maxErrorRatio = "0.05"
)

// TestRolloutAcrossThreeShards is issue 29's whole rollout in one sharded
// run (SPEC G1, G8, G10): three shards, two Kymas each, one planner (shard
// 0's leader) for all of them. The canary, in shard 2, goes first; never
// more than maxInFlight runtimes are in flight across the shards; the wave
// after the canary fails its analysis (a real Prometheus query per
// runtime) and the rollout halts with no other runtime moving; an explicit
// resume takes it to the end; and a rollback takes every runtime back in
// waves, the canary first again.
func TestRolloutAcrossThreeShards(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	publishBeacon(t)

	gauges, err := testcluster.StartGauges()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = gauges.Close() })
	prom, err := testcluster.StartPrometheus(ctx, testcluster.PrometheusOptions{Targets: []string{gauges.Target()}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = prom.Stop() })

	stale := make([]string, threeShards)
	for id := range threeShards {
		stale[id] = leaseHolderOf(g, threeShards, id)
	}
	for id := range threeShards {
		startShardOf(t, fmt.Sprintf("three-shards-%d", id), threeShards, id, "--analysis-prometheus-url="+prom.URL())
	}
	for id := range threeShards {
		g.Eventually(func(g Gomega) {
			holder := leaseHolderOf(g, threeShards, id)
			g.Expect(holder).NotTo(BeEmpty())
			g.Expect(holder).NotTo(Equal(stale[id]), "shard %d's Lease is still held by a process of an earlier run", id)
		}, timeout, interval).Should(Succeed())
	}

	// Two Kymas in each shard, on the four runtimes, each in a sync
	// namespace of its own; the canary is one of shard 2's.
	var names []string
	perShard := make([]int, threeShards)
	for i := 0; len(names) < 2*threeShards; i++ {
		name := fmt.Sprintf("beacon-%d", i)
		if s := shard.Of(name, threeShards); perShard[s] < 2 {
			perShard[s]++
			names = append(names, name)
		}
	}
	canary := ""
	for i, name := range names {
		isCanary := canary == "" && shard.Of(name, threeShards) == 2
		if isCanary {
			canary = name
		}
		createBeaconKyma(t, name, env.runtimes[i%len(env.runtimes)], isCanary)
		// Every runtime but the canary reports errors: the wave after the
		// canary fails its analysis.
		ratio := 0.5
		if isCanary {
			ratio = 0
		}
		gauges.Set(errorRatio, map[string]string{"runtime": name}, ratio)
	}
	for _, name := range names {
		eventuallyReady(g, name)
	}
	scraped(g, prom, names, canary, 0.5)

	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: beacon + "-regular", Namespace: kcpNamespace},
		Spec: v1beta2.ModuleRolloutSpec{
			ModuleName: beacon, Channel: "regular",
			Canary:      &v1beta2.RolloutCanary{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{beaconCanary: "true"}}, Count: intstr.FromInt32(1)},
			MaxInFlight: intstr.FromInt32(2),
			Analysis: []v1beta2.RolloutAnalysis{{Name: "error-rate", Prometheus: &v1beta2.PrometheusAnalysis{
				Query: errorRatio + `{runtime="{runtime}"}`, Max: maxErrorRatio,
			}}},
		},
	}
	g.Expect(env.kcpClient.Create(ctx, ro)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), ro) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.Total).To(Equal(int32(len(names))), "the planner counts the Kymas of all three shards")
	}, timeout, interval).Should(Succeed())

	// The canary first, then a wave that fails its analysis: halted, and
	// nobody else moves.
	forward := trace(t, "2.0.0")
	setBeaconChannel(g, "2.0.0")
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutHalted))
		g.Expect(ro.Status.HaltReason).To(ContainSubstring("analysis error-rate"))
	}, 2*timeout, interval).Should(Succeed())
	g.Expect(ro.Status.Wave).To(Equal(int32(1)), "the canary passed; the wave after it failed: %s", ro.Status.HaltReason)
	g.Expect(ro.Status.Runtimes.Failed).To(HaveLen(2))
	moved := append([]string{canary}, ro.Status.WaveMembers...)
	g.Consistently(func(g Gomega) {
		asked, _ := forward.Order()
		g.Expect(asked).To(ConsistOf(moved))
	}, 5*time.Second, interval).Should(Succeed(), "no other runtime moves while halted")
	for _, name := range names {
		if !slices.Contains(moved, name) {
			g.Expect(beaconVersion(g, name)).To(Equal("1.0.0"), name)
		}
	}
	asked, _ := forward.Order()
	g.Expect(asked[0]).To(Equal(canary), "the canary first")

	// The errors are fixed; the halt holds until someone resumes it.
	for _, name := range names {
		gauges.Set(errorRatio, map[string]string{"runtime": name}, 0)
	}
	scraped(g, prom, names, canary, 0)
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Runtimes.Failed).To(BeEmpty(), "the analyses pass again")
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutHalted), "a halt is sticky")
	}, timeout, interval).Should(Succeed())
	g.Expect(lmrollout.Resume(ctx, env.kcpClient, kcpNamespace, ro.Name, "test: errors fixed")).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.ToVersion).To(Equal("2.0.0"))
		g.Expect(ro.Status.ResumedBy).To(Equal("test: errors fixed"))
		for _, name := range names {
			g.Expect(beaconVersion(g, name)).To(Equal("2.0.0"), name)
		}
	}, 2*timeout, interval).Should(Succeed())
	asked, maxInFlight := forward.Order()
	g.Expect(asked).To(HaveLen(len(names)))
	g.Expect(maxInFlight).To(BeNumerically("<=", 2), "never more than maxInFlight in flight across the shards")

	// Rolled back: every runtime goes back to 1.0.0 in waves, the canary
	// first, with the same gates.
	back := trace(t, "1.0.0")
	_, err = lmrollout.Rollback(ctx, env.kcpClient, kcpNamespace, ro.Name, "test: 2.0.0 is bad after all")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Rollback).NotTo(BeNil())
		g.Expect(ro.Status.Rollback.Refused).To(BeEmpty())
		g.Expect(ro.Status.ToVersion).To(Equal("1.0.0"))
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		for _, name := range names {
			g.Expect(beaconVersion(g, name)).To(Equal("1.0.0"), name)
		}
	}, 2*timeout, interval).Should(Succeed())
	asked, maxInFlight = back.Order()
	g.Expect(asked).To(HaveLen(len(names)))
	g.Expect(asked[0]).To(Equal(canary), "the canary goes back first")
	g.Expect(maxInFlight).To(BeNumerically("<=", 2))
	g.Expect(ro.Status.Wave).To(BeNumerically(">=", 2), "in waves")
	readyThenDeleted(g, names)
}

// scraped waits until Prometheus has every runtime's error ratio as the
// test set it: 0 for the canary, others for the rest. An analysis of a
// runtime without a sample fails, so a rollout must not start before.
func scraped(g Gomega, prom *testcluster.Prometheus, names []string, canary string, others float64) {
	g.Eventually(func(g Gomega) {
		got, err := prom.Samples(context.Background(), errorRatio, "runtime")
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range names {
			want := others
			if name == canary {
				want = 0
			}
			g.Expect(got).To(HaveKeyWithValue(name, want))
		}
	}, timeout, interval).Should(Succeed())
}

// trace records the beacon Manifests' way to version until the test ends.
func trace(t *testing.T, version string) *testrollout.Trace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watcher, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := testrollout.Record(ctx, watcher, kcpNamespace, beacon, version)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// publishBeacon pushes both versions of the beacon module and offers 1.0.0
// on channel regular; they go when the test ends.
func publishBeacon(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var objects []client.Object
	for _, version := range []string{"1.0.0", "2.0.0"} {
		content := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  version: %q\n", beacon, version)
		v := samplemodules.Version{Module: beacon, Version: version, Content: ociartifact.Module{RawManifest: []byte(content)}}
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), beacon, version), v.Content.Layers(), ociartifact.Insecure())
		g.Expect(err).NotTo(HaveOccurred())
		template := v.Template(kcpNamespace, artifact.Links)
		if version == "2.0.0" {
			template.Spec.RollbackTo = []string{"1.0.x"}
		}
		objects = append(objects, template)
	}
	objects = append(objects, samplemodules.ReleaseMeta(kcpNamespace, beacon, map[string]string{"regular": "1.0.0"}))
	for _, obj := range objects {
		g.Expect(env.kcpClient.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), obj) })
	}
}

func setBeaconChannel(g Gomega, version string) {
	g.Eventually(func(g Gomega) {
		meta := &v1beta2.ModuleReleaseMeta{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: beacon}, meta)).To(Succeed())
		meta.Spec.Channels = []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: version}}
		g.Expect(env.kcpClient.Update(context.Background(), meta)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// createBeaconKyma registers a runtime under a Kyma with the beacon module,
// syncing into a namespace of its own (runtimes are shared).
func createBeaconKyma(t *testing.T, name string, rt interface{ Kubeconfig() []byte }, canary bool) {
	t.Helper()
	labels := map[string]string{v1beta2.RuntimeIDLabel: name}
	if canary {
		labels[beaconCanary] = "true"
	}
	registerKyma(t, rt, &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: labels},
		Spec: v1beta2.KymaSpec{Channel: "regular", SyncNamespace: name, Modules: []v1beta2.Module{{
			Name: beacon, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
		}}},
	})
}

func beaconVersion(g Gomega, kymaName string) string {
	return versionOf(g, kymaName, beacon)
}

package ha

import (
	"context"
	"net"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// TestEachShardHoldsItsShareAndFilesItsNewKymas runs a process per shard
// over Kymas and kubeconfig Secrets created without the shard bucket label,
// one Kyma of shard 1 labelled by hand with a bucket of shard 0. Every Kyma,
// its Manifest and its Secret end up filed under the Kyma's bucket; each
// Kyma is worked on by its own shard alone and becomes Ready; and each
// process's informers hold what its selector admits and nothing of the
// other shard's, as its lifecycle_manager_cached_objects metric says, so
// the two shards together hold each object once.
func TestEachShardHoldsItsShareAndFilesItsNewKymas(t *testing.T) {
	g := NewWithT(t)
	names := kymaNames(runtimeCount / shards)
	all := append(append([]string{}, names[0]...), names[1]...)
	mislabelled := names[1][0]
	addrs := [shards]string{freeAddr(t), freeAddr(t)}
	processes := [shards]*process{
		startShardOf(t, "cache-shard-0", shards, 0, "--metrics-bind-address="+addrs[0]),
		startShardOf(t, "cache-shard-1", shards, 1, "--metrics-bind-address="+addrs[1]),
	}

	for i, name := range all {
		var own map[string]string
		if name == mislabelled {
			own = map[string]string{v1beta2.ShardBucketLabel: strconv.Itoa(bucketOf(0))}
		}
		createLabelledKyma(t, name, env.runtimes[i], own)
	}
	for _, name := range all {
		eventuallyReady(g, name)
		want := strconv.Itoa(shard.Bucket(name))
		for _, obj := range []client.Object{&v1beta2.Kyma{}, &v1beta2.Manifest{}, &corev1.Secret{}} {
			key := client.ObjectKey{Namespace: kcpNamespace, Name: name}
			switch obj.(type) {
			case *v1beta2.Manifest:
				key.Name = kyma.ManifestName(name, samplemodules.Evolving)
			case *corev1.Secret:
				key.Name = name + "-kubeconfig"
			}
			g.Eventually(func(g Gomega) {
				g.Expect(env.kcpClient.Get(context.Background(), key, obj)).To(Succeed())
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue(v1beta2.ShardBucketLabel, want))
			}, timeout, interval).Should(Succeed(), "%T %s is filed under its Kyma's bucket", obj, key.Name)
		}
	}
	for id, p := range processes {
		g.Expect(p.workedOn(t, all)).To(ConsistOf(names[id]), "the process of shard %d worked on exactly the Kymas of shard %d", id, id)
	}

	g.Eventually(func(g Gomega) {
		var sum map[string]float64
		for id, addr := range addrs {
			held := cachedObjects(g, addr, id)
			admitted := admittedBy(g, shard.Shard{Count: shards, ID: id})
			g.Expect(held).To(Equal(admitted), "shard %d's informers hold what its selector admits", id)
			g.Expect(held["Kyma"]).To(BeNumerically(">=", len(names[id])))
			sum = addUp(sum, held)
		}
		total := admittedBy(g, shard.Shard{})
		g.Expect(sum["Kyma"]).To(Equal(total["Kyma"]), "the shards hold each Kyma once")
		g.Expect(sum["Manifest"]).To(Equal(total["Manifest"]), "the shards hold each Manifest once")
	}, timeout, interval).Should(Succeed())
}

// bucketOf is the first bucket of shard id.
func bucketOf(id int) int {
	for b := range shard.Buckets {
		if b%shards == id {
			return b
		}
	}
	return -1
}

// admittedBy counts, by kind, the Kymas, Manifests and Secrets of the
// namespace that s's selector admits, as the API server has them.
func admittedBy(g Gomega, s shard.Shard) map[string]float64 {
	ctx := context.Background()
	selector := client.MatchingLabelsSelector{Selector: s.Selector()}
	out := map[string]float64{}
	for kind, list := range map[string]client.ObjectList{"Kyma": &v1beta2.KymaList{}, "Manifest": &v1beta2.ManifestList{}, "Secret": &corev1.SecretList{}} {
		g.Expect(env.kcpClient.List(ctx, list, client.InNamespace(kcpNamespace), selector)).To(Succeed())
		out[kind] = float64(meta.LenList(list))
	}
	return out
}

func addUp(sum, more map[string]float64) map[string]float64 {
	if sum == nil {
		sum = map[string]float64{}
	}
	for k, v := range more {
		sum[k] += v
	}
	return sum
}

// cachedObjects is lifecycle_manager_cached_objects of the process serving
// metrics at addr, by kind.
func cachedObjects(g Gomega, addr string, id int) map[string]float64 {
	families, err := testcluster.Scrape(addr)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, m := range families["lifecycle_manager_cached_objects"].GetMetric() {
		by := map[string]string{}
		for _, l := range m.GetLabel() {
			by[l.GetName()] = l.GetValue()
		}
		g.Expect(by).To(HaveKeyWithValue("shard", strconv.Itoa(id)))
		out[by["kind"]] = m.GetGauge().GetValue()
	}
	g.Expect(out).To(HaveLen(3), "the metric counts Kymas, Manifests and Secrets")
	return out
}

// freeAddr is a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

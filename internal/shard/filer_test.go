package shard

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// filed waits on a real API server, loaded by other tests.
const filedTimeout = 2 * time.Minute

// TestShardsFileTheFleetAndHoldTheirShareOnly runs the managers of two
// shards, as the operator builds them (ByObject, NewCache, Setup), over
// Kymas, Manifests and kubeconfig Secrets created without the label, one
// Kyma labelled by hand with the other shard's bucket, and one with a
// value that is no bucket. Every object ends up filed under its Kyma's
// bucket, and then each shard's informers hold its own Kymas, Manifests
// and kubeconfig Secrets alone (and the Secret of no Kyma, which is
// everyone's), as the process's metric counts too.
func TestShardsFileTheFleetAndHoldTheirShareOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	namespace := createNamespace(t)
	names := [2][]string{{nameIn(t, 0)}, {nameIn(t, 1)}}
	names[0] = append(names[0], nameIn(t, 0, names[0]...))
	names[1] = append(names[1], nameIn(t, 1, names[1]...))
	handSet := map[string]string{
		names[0][1]: bucketIn(t, 1, 2, names[0][1]), // another shard's bucket
		names[1][1]: "not-a-bucket",
	}
	for _, share := range names {
		for _, name := range share {
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: v1beta2.KymaSpec{Channel: "regular"}}
			if bucket, ok := handSet[name]; ok {
				kyma.Labels = map[string]string{v1beta2.ShardBucketLabel: bucket}
			}
			g.Expect(admin.Create(ctx, kyma)).To(Succeed())
			of := map[string]string{v1beta2.KymaNameLabel: name}
			g.Expect(admin.Create(ctx, &v1beta2.Manifest{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-module", Namespace: namespace, Labels: of},
				Spec:       v1beta2.ManifestSpec{Remote: true},
			})).To(Succeed())
			g.Expect(admin.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: namespace, Labels: of},
			})).To(Succeed())
		}
	}
	g.Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: namespace}})).To(Succeed())

	managers := [2]ctrl.Manager{startShardManager(t, Shard{Count: 2, ID: 0}, namespace), startShardManager(t, Shard{Count: 2, ID: 1}, namespace)}

	for _, share := range names {
		for _, name := range share {
			want := strconv.Itoa(Bucket(name))
			for _, obj := range []client.Object{&v1beta2.Kyma{}, &v1beta2.Manifest{}, &corev1.Secret{}} {
				key := client.ObjectKey{Namespace: namespace, Name: name}
				switch obj.(type) {
				case *v1beta2.Manifest:
					key.Name += "-module"
				case *corev1.Secret:
					key.Name += "-kubeconfig"
				}
				g.Eventually(func(g Gomega) {
					g.Expect(admin.Get(ctx, key, obj)).To(Succeed())
					g.Expect(obj.GetLabels()).To(HaveKeyWithValue(v1beta2.ShardBucketLabel, want))
				}, filedTimeout, 200*time.Millisecond).Should(Succeed(), "%T %s filed under its Kyma's bucket", obj, key.Name)
			}
		}
	}
	registry := &corev1.Secret{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "registry"}, registry)).To(Succeed())
	g.Expect(registry.Labels).NotTo(HaveKey(v1beta2.ShardBucketLabel), "a Secret of no Kyma is no shard's")

	for id, mgr := range managers {
		g.Eventually(func(g Gomega) {
			held, err := Held(ctx, mgr.GetCache())
			g.Expect(err).NotTo(HaveOccurred())
			objects := map[string]int{}
			for _, h := range held {
				objects[h.Kind] = h.Objects
				g.Expect(h.Bytes).To(BeNumerically(">", 0), "the size of the cached %ss", h.Kind)
			}
			// Its two kubeconfig Secrets, and the registry's.
			g.Expect(objects).To(Equal(map[string]int{"Kyma": 2, "Manifest": 2, "Secret": 3}), "shard %d holds its own share only", id)
			kymas := &v1beta2.KymaList{}
			g.Expect(Unfiltered(mgr.GetCache()).List(ctx, kymas)).To(Succeed())
			g.Expect(namesOf(kymas.Items)).To(ConsistOf(names[id]), "the Kymas in shard %d's informers", id)
		}, filedTimeout, 200*time.Millisecond).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(cachedObjects(g, "0")).To(Equal(map[string]float64{"Kyma": 2, "Manifest": 2, "Secret": 3}))
	}, filedTimeout, 200*time.Millisecond).Should(Succeed(), "lifecycle_manager_cached_objects counts what shard 0 holds")
}

// startShardManager starts a manager of shard s over namespace, with the
// cache options and parts of the operator's (internal/operator).
func startShardManager(t *testing.T, s Shard, namespace string) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(kcp.Config(), ctrl.Options{
		Scheme:                 admin.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewCache:               s.NewCache(cache.New),
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			ByObject:          s.ByObject(labels.Everything()),
		},
		// Both shards run in this process, and again with -count.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Setup(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager of shard %d: %v", s.ID, err)
		}
	})
	return mgr
}

// cachedObjects is lifecycle_manager_cached_objects of shard, by kind, as
// this process's registry serves it.
func cachedObjects(g Gomega, shard string) map[string]float64 {
	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "lifecycle_manager_cached_objects" {
			continue
		}
		for _, m := range f.GetMetric() {
			by := map[string]string{}
			for _, l := range m.GetLabel() {
				by[l.GetName()] = l.GetValue()
			}
			if by["shard"] == shard {
				out[by["kind"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

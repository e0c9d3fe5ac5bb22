package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// benchModuleNames are valid module names (letters only, segments of three
// or more).
var benchModuleNames = []string{"bench-alpha", "bench-bravo", "bench-charlie", "bench-delta", "bench-echo",
	"bench-foxtrot", "bench-golf", "bench-hotel", "bench-india", "bench-juliet"}

// BenchmarkInstall installs N Kymas × M modules into one shared runtime
// (each Kyma in a sync namespace of its own, SPEC R19) and reports the time
// until all are Ready and the reconciles per second. BENCH_KYMAS and
// BENCH_MODULES choose N and M (defaults 20 and 3).
func BenchmarkInstall(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	kymas := envInt("BENCH_KYMAS", 20)
	modules := min(envInt("BENCH_MODULES", 3), len(benchModuleNames))

	for _, name := range benchModuleNames[:modules] {
		publishOnce(b, name)
	}
	rt := <-env.runtimes
	defer func() { env.runtimes <- rt }()

	for i := 0; b.Loop(); i++ {
		prefix := fmt.Sprintf("bench-%d", i)
		reconcilesBefore := counterValue(metrics.KymaReconciles) + counterValue(metrics.ManifestReconciles)
		start := time.Now()
		for k := range kymas {
			name := fmt.Sprintf("%s-%d", prefix, k)
			g.Expect(env.kcpClient.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
				Data:       map[string][]byte{"config": rt.cluster.Kubeconfig()},
			})).To(Succeed())
			spec := v1beta2.KymaSpec{Channel: "regular", SyncNamespace: name}
			for _, m := range benchModuleNames[:modules] {
				spec.Modules = append(spec.Modules, module(m))
			}
			g.Expect(env.kcpClient.Create(ctx, &v1beta2.Kyma{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{"bench": prefix}},
				Spec:       spec,
			})).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			list := &v1beta2.KymaList{}
			g.Expect(env.kcpClient.List(ctx, list, client.MatchingLabels{"bench": prefix})).To(Succeed())
			ready := 0
			for _, k := range list.Items {
				if k.Status.State == v1beta2.StateReady {
					ready++
				}
			}
			g.Expect(ready).To(Equal(kymas))
		}, 10*time.Minute, 200*time.Millisecond).Should(Succeed())
		elapsed := time.Since(start)
		reconciles := counterValue(metrics.KymaReconciles) + counterValue(metrics.ManifestReconciles) - reconcilesBefore

		b.StopTimer()
		b.ReportMetric(elapsed.Seconds(), "s-to-ready")
		b.ReportMetric(reconciles/elapsed.Seconds(), "reconciles/s")
		b.ReportMetric(float64(kymas*modules)/elapsed.Seconds(), "manifests-ready/s")
		fmt.Printf("BenchmarkInstall: %d Kymas x %d modules Ready in %s, %.0f reconciles (%.1f/s)\n",
			kymas, modules, elapsed.Round(time.Millisecond), reconciles, reconciles/elapsed.Seconds())
		cleanupBench(b, prefix)
		b.StartTimer()
	}
}

func publishOnce(b *testing.B, name string) {
	ctx := context.Background()
	template := &v1beta2.ModuleTemplate{}
	if err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name + "-1.0.0"}, template); err == nil {
		return
	}
	manifest := fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  module: %s\n", name, name)
	artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:1.0.0", env.registry.Host(), name),
		ociartifact.Module{RawManifest: manifest}.Layers(), ociartifact.Insecure())
	if err != nil {
		b.Fatal(err)
	}
	t := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1.0.0", Namespace: kcpNamespace},
		Spec: v1beta2.ModuleTemplateSpec{ModuleName: name, Version: "1.0.0",
			Resources: []v1beta2.ContentResource{{Name: v1beta2.RawManifestResourceName, Link: artifact.Links[v1beta2.RawManifestResourceName]}}},
	}
	meta := &v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace},
		Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: name, Channels: []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "1.0.0"}}},
	}
	for _, obj := range []client.Object{t, meta} {
		if err := env.kcpClient.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
}

func cleanupBench(b *testing.B, prefix string) {
	g := NewWithT(b)
	ctx := context.Background()
	g.Expect(env.kcpClient.DeleteAllOf(ctx, &v1beta2.Kyma{}, client.InNamespace(kcpNamespace), client.MatchingLabels{"bench": prefix})).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &v1beta2.KymaList{}
		g.Expect(env.kcpClient.List(ctx, list, client.MatchingLabels{"bench": prefix})).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}, 10*time.Minute, 200*time.Millisecond).Should(Succeed())
	secrets := &corev1.SecretList{}
	g.Expect(env.kcpClient.List(ctx, secrets, client.InNamespace(kcpNamespace))).To(Succeed())
	for i := range secrets.Items {
		if name := secrets.Items[i].Labels[v1beta2.KymaNameLabel]; len(name) > len(prefix) && name[:len(prefix)+1] == prefix+"-" {
			err := env.kcpClient.Delete(ctx, &secrets.Items[i])
			g.Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue())
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

package analysis

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

const (
	// namespace holds the tests' Manifests and kubeconfig Secrets;
	// syncNamespace is the operator's default namespace in runtimes.
	namespace     = "analysis"
	syncNamespace = "kyma-system"

	timeout  = time.Minute
	interval = 100 * time.Millisecond
)

// env is the package's environment: a control plane that is also the
// runtime of every test Kyma (their kubeconfig Secrets point back at it),
// and a real Prometheus scraping gauges the tests set.
var env struct {
	kcp        *testcluster.ControlPlane
	client     client.Client
	scheme     *k8sruntime.Scheme
	runtimes   *remote.Cache
	gauges     *testcluster.Gauges
	prometheus *testcluster.Prometheus
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		return 1
	}
	defer stop()
	return m.Run()
}

func setup(ctx context.Context) error {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return err
	}
	if env.gauges, err = testcluster.StartGauges(); err != nil {
		return err
	}
	if env.prometheus, err = testcluster.StartPrometheus(ctx, testcluster.PrometheusOptions{Targets: []string{env.gauges.Target()}}); err != nil {
		return err
	}
	if env.kcp, err = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases"), filepath.Join("testdata", "samples-crd.yaml")},
	}); err != nil {
		return err
	}
	env.scheme = k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(env.scheme); err != nil {
		return err
	}
	if err := v1beta2.AddToScheme(env.scheme); err != nil {
		return err
	}
	if env.client, err = client.New(env.kcp.Config(), client.Options{Scheme: env.scheme}); err != nil {
		return err
	}
	for _, ns := range []string{namespace, syncNamespace} {
		if err := env.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	env.runtimes = remote.NewCache(env.client, env.client, remote.Options{Scheme: env.scheme, Namespace: namespace, RequestTimeout: 10 * time.Second})
	return nil
}

func stop() {
	if env.kcp != nil {
		_ = env.kcp.Stop()
	}
	if env.prometheus != nil {
		_ = env.prometheus.Stop()
	}
	if env.gauges != nil {
		_ = env.gauges.Close()
	}
}

// newAnalyzer is an analyzer of the package's fleet with opts.
func newAnalyzer(g Gomega, opts Options) *Analyzer {
	a, err := New(opts, Fleet{Manifests: env.client, Runtimes: env.runtimes, Namespace: namespace, SyncNamespace: syncNamespace})
	g.Expect(err).NotTo(HaveOccurred())
	return a
}

// rolloutOf is a rollout of module with analyses, as Analyze reads it.
func rolloutOf(module string, analyses ...v1beta2.RolloutAnalysis) *v1beta2.ModuleRollout {
	return &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-regular", Namespace: namespace},
		Spec:       v1beta2.ModuleRolloutSpec{ModuleName: module, Channel: "regular", Analysis: analyses},
	}
}

func promAnalysis(name, query, maxValue, minValue string) v1beta2.RolloutAnalysis {
	return v1beta2.RolloutAnalysis{Name: name, Prometheus: &v1beta2.PrometheusAnalysis{Query: query, RuntimeLabel: "runtime", Max: maxValue, Min: minValue}}
}

// setGauges sets the gauge metric of each runtime (label runtime) and
// waits until Prometheus returns these values: a scrape took them.
func setGauges(g Gomega, metric string, values map[string]float64) {
	for rt, v := range values {
		env.gauges.Set(metric, map[string]string{"runtime": rt}, v)
	}
	g.Eventually(func(g Gomega) {
		got, err := env.prometheus.Samples(context.Background(), metric, "runtime")
		g.Expect(err).NotTo(HaveOccurred())
		for rt, want := range values {
			g.Expect(got).To(HaveKey(rt), "a scrape took %s of %s", metric, rt)
			if math.IsNaN(want) {
				g.Expect(math.IsNaN(got[rt])).To(BeTrue(), "%s of %s is NaN", metric, rt)
				continue
			}
			g.Expect(got[rt]).To(Equal(want), "%s of %s", metric, rt)
		}
	}, timeout, interval).Should(Succeed())
}

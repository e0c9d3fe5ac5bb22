package watcher

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// seriesName finds the operator's series in PromQL: ours, controller-
// runtime's and its work queues'.
var seriesName = regexp.MustCompile(`\b(?:lifecycle_manager|controller_runtime|workqueue)_[a-z_]+\b`)

// TestDashboardAndAlertSeriesExist scrapes the running operator's /metrics
// after a watched runtime installed a module, and finds there every series
// that the shipped Grafana dashboard and PrometheusRule query: a renamed or
// dropped metric fails here, not in an SRE's empty panel or silent alert.
func TestDashboardAndAlertSeriesExist(t *testing.T) {
	g := NewWithT(t)
	k := newWatchedKyma(t, "metrics")
	k.installEvolving(g)
	// A rollout of the module, so that the rollout alerts' series exist.
	ctx := context.Background()
	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-evolving", Namespace: kcpNamespace},
		Spec:       v1beta2.ModuleRolloutSpec{ModuleName: samplemodules.Evolving, Channel: "regular", MaxInFlight: intstr.FromInt32(1)},
	}
	g.Expect(env.kcpClient.Create(ctx, ro)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, ro) })
	// A backup schedule selects the Kyma, so that the backups' series
	// exist (its first backup is due at midnight).
	backedUp := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}}
	g.Expect(env.kcpClient.Patch(ctx, backedUp, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+backedUpLabel+`":"yes"}}}`)))).To(Succeed())

	wanted := queriedSeries(t)
	g.Expect(wanted).To(ContainElements("lifecycle_manager_kyma_state", "lifecycle_manager_module_time_to_ready_seconds", "workqueue_depth",
		"lifecycle_manager_rollout_halted", "lifecycle_manager_rollout_last_progress_timestamp_seconds", "lifecycle_manager_rollout_planned_timestamp_seconds",
		"lifecycle_manager_backup_last_success_timestamp_seconds", "lifecycle_manager_shard_leader"),
		"the dashboard and the alerts query the fleet's states, time to Ready, queue depth, the rollouts, the backups and the leaders")
	g.Eventually(func(g Gomega) {
		families := scrape(g)
		for _, name := range wanted {
			family, ok := families[name]
			g.Expect(ok && len(family.GetMetric()) > 0).To(BeTrue(), "the operator's /metrics has no series %s", name)
		}
		g.Expect(rolloutSeries(families, ro.Name)).To(ContainElements(
			`lifecycle_manager_rollout_phase{phase="Completed"} 1`, `lifecycle_manager_rollout_halted 0`,
			`lifecycle_manager_rollout_runtimes{state="failed"} 0`))
	}, timeout, interval).Should(Succeed())

	// A rollout deleted takes its series with it.
	g.Expect(env.kcpClient.Delete(ctx, ro)).To(Succeed())
	g.Eventually(func(g Gomega) []string { return rolloutSeries(scrape(g), ro.Name) }, timeout, interval).Should(BeEmpty())
}

// rolloutSeries are the series of a rollout among families, as
// "name{other labels} value".
func rolloutSeries(families map[string]*dto.MetricFamily, rollout string) []string {
	var out []string
	for name, family := range families {
		for _, m := range family.GetMetric() {
			mine, labels := false, []string{}
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "rollout":
					mine = l.GetValue() == rollout
				case "module", "channel":
				default:
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			if !mine {
				continue
			}
			s := name
			if len(labels) > 0 {
				s += "{" + strings.Join(labels, ",") + "}"
			}
			out = append(out, fmt.Sprintf("%s %v", s, m.GetGauge().GetValue()))
		}
	}
	return out
}

// queriedSeries are the metric families the chart's dashboard and alerts
// query (histogram buckets, sums and counts by their family's name).
func queriedSeries(t *testing.T) []string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]any{"enabled": true}
	rendered, err := install.RenderChart(filepath.Join(root, "charts", "lifecycle-manager"), kcpNamespace, map[string]any{"prometheusRule": on, "dashboard": on})
	if err != nil {
		t.Fatal(err)
	}
	var queries []string
	for _, obj := range rendered.Objects() {
		switch obj.GetKind() {
		case "ConfigMap":
			if dashboard, ok, _ := unstructured.NestedString(obj.Object, "data", "lifecycle-manager.json"); ok {
				queries = append(queries, dashboard)
			}
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "groups")
			for _, group := range groups {
				rules, _, _ := unstructured.NestedSlice(group.(map[string]any), "rules")
				for _, rule := range rules {
					expr, _, _ := unstructured.NestedString(rule.(map[string]any), "expr")
					queries = append(queries, expr)
				}
			}
		}
	}
	if len(queries) < 2 {
		t.Fatalf("found %d dashboards and alert expressions in the chart, want the dashboard and the alerts", len(queries))
	}
	var names []string
	for _, q := range queries {
		for _, name := range seriesName.FindAllString(q, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				name = strings.TrimSuffix(name, suffix)
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

func scrape(g Gomega) map[string]*dto.MetricFamily {
	families, err := testcluster.Scrape(env.metricsAddr)
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

package ha

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// alertShards is the shard count of the alert test: a count no other test
// uses, so that its Leases are its own.
const alertShards = 4

// The chart's high-availability alerts, evaluated by a real Prometheus
// scraping real operator processes of two of four shards: a shard without
// any process is absent from the start; a shard whose one process stands
// by, because something else holds its Lease, has no leader until the
// Lease is free; and a shard whose process is killed turns absent.
func TestLeaderAlertsOfTheChart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	noLeader, absent := haAlerts(t)
	g.Expect(absent).To(HaveLen(alertShards), "one LifecycleManagerShardAbsent rule per shard")

	// Another holder keeps shard 1's Lease for an hour.
	foreign := foreignLease(t, 1)

	ports, err := testcluster.FreePorts(2)
	g.Expect(err).NotTo(HaveOccurred())
	var targets []string
	procs := make([]*process, 2)
	for id := range procs {
		addr := "127.0.0.1:" + strconv.Itoa(ports[id])
		targets = append(targets, addr)
		procs[id] = startShardOf(t, fmt.Sprintf("alerts-shard-%d", id), alertShards, id, "--metrics-bind-address="+addr)
	}
	prom, err := testcluster.StartPrometheus(ctx, testcluster.PrometheusOptions{Targets: targets, Labels: map[string]string{"namespace": kcpNamespace}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = prom.Stop() })

	firing := func(g Gomega, query string) []string {
		samples, err := prom.Samples(ctx, query, "shard")
		g.Expect(err).NotTo(HaveOccurred())
		var shards []string
		for s := range samples {
			shards = append(shards, s)
		}
		return shards
	}
	absentShards := func(g Gomega) []string {
		var out []string
		for id, query := range absent {
			if len(firing(g, query)) > 0 {
				out = append(out, strconv.Itoa(id))
			}
		}
		return out
	}
	g.Eventually(func(g Gomega) {
		g.Expect(firing(g, noLeader)).To(ConsistOf("1"), "shard 1's process stands by; shard 0's leads")
		g.Expect(absentShards(g)).To(ConsistOf("2", "3"), "no process of shards 2 and 3 runs")
	}, time.Minute, time.Second).Should(Succeed())

	// The Lease is free: shard 1's process leads.
	g.Expect(env.kcpClient.Delete(ctx, foreign)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(firing(g, noLeader)).To(BeEmpty())
	}, time.Minute, time.Second).Should(Succeed())

	// Shard 1's only process is gone.
	g.Expect(procs[1].cmd.Kill()).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(absentShards(g)).To(ConsistOf("1", "2", "3"))
		g.Expect(firing(g, noLeader)).To(BeEmpty())
	}, time.Minute, time.Second).Should(Succeed())
}

// haAlerts are the expressions of the chart's LifecycleManagerNoLeader
// rule and of its LifecycleManagerShardAbsent rules by shard, rendered for
// alertShards shards.
func haAlerts(t *testing.T) (noLeader string, absent map[int]string) {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := install.RenderChart(filepath.Join(root, "charts", "lifecycle-manager"), kcpNamespace,
		map[string]any{"prometheusRule": map[string]any{"enabled": true}, "shards": alertShards})
	if err != nil {
		t.Fatal(err)
	}
	absent = map[int]string{}
	for _, obj := range rendered.Objects() {
		if obj.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "groups")
		for _, group := range groups {
			rules, _, _ := unstructured.NestedSlice(group.(map[string]any), "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				expr, _ := rule["expr"].(string)
				switch rule["alert"] {
				case "LifecycleManagerNoLeader":
					noLeader = expr
				case "LifecycleManagerShardAbsent":
					absent[len(absent)] = expr
				}
			}
		}
	}
	if noLeader == "" {
		t.Fatal("the chart has no LifecycleManagerNoLeader rule")
	}
	return noLeader, absent
}

// foreignLease makes the Lease of shard id of alertShards held by a
// process that is not the operator, renewed now for an hour.
func foreignLease(t *testing.T, id int) *coordinationv1.Lease {
	t.Helper()
	ctx := context.Background()
	name := shard.Shard{Count: alertShards, ID: id}.LeaseName("lifecycle-manager.operator.kyma-project.io")
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace}}
	err := env.kcpClient.Delete(ctx, lease)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	lease = &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("someone-else"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}
	if err := env.kcpClient.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.kcpClient.Delete(ctx, lease)) })
	return lease
}

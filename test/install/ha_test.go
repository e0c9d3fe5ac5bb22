package install

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// helm install with shards and replicas: a Deployment and a listener
// Service per shard, each Deployment's pods told their shard, each shard's
// agents sent to a URL of its own, and a disruption budget that counts the
// leaders alone. The API server takes every object.
func TestChartShardsTheFleet(t *testing.T) {
	const ns, shards, replicas = "sharded", 3, 2
	rendered, err := install.RenderChart(chart, ns, map[string]any{
		"shards":   shards,
		"replicas": replicas,
		"listener": map[string]any{"url": "https://listener-{shard}.fleet.example.com:443", "names": []any{"listener-{shard}.fleet.example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := rendered.Objects()
	all := byKey(objs)
	for id := range shards {
		d := &appsv1.Deployment{}
		obj := all[fmt.Sprintf("Deployment %s/lifecycle-manager-shard-%d", ns, id)]
		if obj == nil {
			t.Fatalf("no Deployment of shard %d", id)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
			t.Fatal(err)
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{
			"--shards=3", fmt.Sprintf("--shard-id=%d", id), "--leader-elect",
			fmt.Sprintf("--listener-url=https://listener-%d.fleet.example.com:443", id),
			fmt.Sprintf("--listener-names=lifecycle-manager-listener-%d.%s.svc,listener-%d.fleet.example.com", id, ns, id),
		} {
			if !slices.Contains(args, want) {
				t.Errorf("shard %d's args %v lack %s", id, args, want)
			}
		}
		if *d.Spec.Replicas != replicas {
			t.Errorf("shard %d has %d replicas, want %d", id, *d.Spec.Replicas, replicas)
		}
		shardLabel := fmt.Sprint(id)
		if d.Spec.Selector.MatchLabels["operator.kyma-project.io/shard"] != shardLabel || d.Spec.Template.Labels["operator.kyma-project.io/shard"] != shardLabel {
			t.Errorf("shard %d's pods are not told apart: selector %v, labels %v", id, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}

		svc := &corev1.Service{}
		obj = all[fmt.Sprintf("Service %s/lifecycle-manager-listener-%d", ns, id)]
		if obj == nil {
			t.Fatalf("no listener Service of shard %d", id)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, svc); err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Selector["operator.kyma-project.io/shard"] != shardLabel {
			t.Errorf("the listener Service of shard %d selects %v: the agents would reach other shards", id, svc.Spec.Selector)
		}
	}
	if _, ok := all[fmt.Sprintf("Deployment %s/lifecycle-manager", ns)]; ok {
		t.Error("a sharded install still has the unsharded Deployment")
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(all[fmt.Sprintf("PodDisruptionBudget %s/lifecycle-manager", ns)].Object, pdb); err != nil {
		t.Fatal(err)
	}
	// 6 pods, 3 of them leaders: the standbys and one leader may go.
	if got := pdb.Spec.MaxUnavailable.IntValue(); got != shards*(replicas-1)+1 {
		t.Errorf("the PDB allows %d unavailable pods, want %d (every standby and one leader)", got, shards*(replicas-1)+1)
	}
	ctx := testContext(t)
	if err := admin.Create(ctx, namespaceObject(ns)); err != nil {
		t.Fatal(err)
	}
	applyStrictly(t, append(rendered.CRDs, objs...))

	if _, err := install.RenderChart(chart, ns, map[string]any{"shards": 0}); err == nil {
		t.Error("the chart rendered with shards: 0")
	}
}

// Two replicas of the rendered Deployment: one leads and is ready, the
// other is a standby and not ready, so that the listener's Service sends
// agents to the leader alone. The leader killed, the standby leads within
// the Lease's duration and becomes ready.
func TestStandbyIsNotReadyUntilItLeads(t *testing.T) {
	objs, err := install.RenderKustomize(config)
	if err != nil {
		t.Fatal(err)
	}
	// Two Leases may run out here, each in 15 s: one a killed operator of
	// an earlier test left, and the one of the leader this test kills.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apply(ctx, t, objs)
	kubeconfig := serviceAccountKubeconfig(ctx, t, "kcp-system", "lifecycle-manager")
	bin := buildOperator(t)
	deployArgs := deploymentOf(t, objs, "kcp-system").Spec.Template.Spec.Containers[0].Args

	type replica struct {
		cmd    *testcluster.Command
		probes string
	}
	var replicas []replica
	for i := range 2 {
		args, probes := podArgs(t, deployArgs)
		cmd, err := testcluster.StartCommand(bin, append(args, "--kubeconfig="+kubeconfig), filepath.Join(t.TempDir(), fmt.Sprintf("replica-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Kill() })
		replicas = append(replicas, replica{cmd: cmd, probes: probes})
	}
	ready := func(r replica) (bool, error) {
		if err := r.cmd.ExitError(); err != nil {
			return false, err
		}
		resp, err := http.Get("http://" + r.probes + "/readyz")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
	explain := func() string {
		return "replica 0:\n" + replicas[0].cmd.LogTail(20) + "\nreplica 1:\n" + replicas[1].cmd.LogTail(20)
	}
	var leader, standby replica
	waitFor(ctx, t, "one replica to lead and become ready", explain, func() (bool, error) {
		for i, r := range replicas {
			ok, err := ready(r)
			if err != nil || !ok {
				continue
			}
			leader, standby = r, replicas[1-i]
			return true, nil
		}
		return false, nil
	})
	// The standby has started (its probes answer) and is not ready.
	waitFor(ctx, t, "the standby's probes to answer", explain, func() (bool, error) {
		resp, err := http.Get("http://" + standby.probes + "/healthz")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if ok, err := ready(standby); err != nil || ok {
		t.Fatalf("the standby is ready (%v, %v) while the other replica leads\n%s", ok, err, explain())
	}

	if err := leader.cmd.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the standby to lead and become ready", explain, func() (bool, error) { return ready(standby) })
}

func namespaceObject(name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	ns.Name = name
	return ns
}

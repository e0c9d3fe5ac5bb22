package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/leaderpod"
	"github.com/runtime-fleet/lifecycle-manager/internal/testkubelet"
)

// helm install with shards and replicas: a Deployment and a listener
// Service per shard, each Deployment's pods told their shard, each shard's
// agents sent to its leader alone, and a disruption budget that lets one
// pod go at a time. The API server takes every object.
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
		if svc.Spec.Selector[leaderpod.Label] != "true" {
			t.Errorf("the listener Service of shard %d selects %v: the agents would reach standbys", id, svc.Spec.Selector)
		}
	}
	if _, ok := all[fmt.Sprintf("Deployment %s/lifecycle-manager", ns)]; ok {
		t.Error("a sharded install still has the unsharded Deployment")
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(all[fmt.Sprintf("PodDisruptionBudget %s/lifecycle-manager", ns)].Object, pdb); err != nil {
		t.Fatal(err)
	}
	// Standbys are ready and count: one pod of the 6 at a time may go, so
	// that every shard keeps a process that can lead.
	if got := pdb.Spec.MaxUnavailable.IntValue(); got != 1 {
		t.Errorf("the PDB allows %d unavailable pods, want 1", got)
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

// Two replicas of the rendered Deployment, run by a test kubelet as Pods
// under the operator's ServiceAccount: both become ready (a standby is ready
// to lead), and the leader alone labels its Pod, which the listener's
// Service selects. The leader crashes: the standby takes the Lease over and
// labels its own Pod, and the crashed process, restarted in its old Pod,
// clears the label it left there and is ready as a standby. No request is
// refused: the Role lets the operator label its Pod.
func TestStandbyIsReadyAndTheLeaderAloneIsLabelled(t *testing.T) {
	objs, err := install.RenderKustomize(config)
	if err != nil {
		t.Fatal(err)
	}
	// The crashed leader's Lease runs out in 15 s; a Lease left by an
	// operator of an earlier test may have to run out first.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apply(ctx, t, objs)
	kubeconfig := serviceAccountKubeconfig(ctx, t, "kcp-system", "lifecycle-manager")
	deploy := deploymentOf(t, objs, "kcp-system")
	clientset, err := kubernetes.NewForConfig(kcp.Config())
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := testkubelet.Start(ctx, testkubelet.Options{
		Client: clientset, Namespace: "kcp-system", Selector: labels.SelectorFromSet(deploy.Spec.Selector.MatchLabels),
		NodeName: "install-node", Binary: buildOperator(t), ExtraArgs: []string{"--kubeconfig=" + kubeconfig},
		Dir: t.TempDir(), ReadinessPeriod: time.Second,
		// Longer than the Lease (15 s) and the standby's retry: the standby
		// leads before the crashed process is back in its labelled Pod.
		RestartDelay: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.Stop)
	names := []string{"lifecycle-manager-a", "lifecycle-manager-b"}
	for _, name := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kcp-system", Labels: deploy.Spec.Template.Labels},
			Spec:       deploy.Spec.Template.Spec,
		}
		if err := admin.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	}
	explain := func() string { return describePods(ctx, names) + kubelet.LogTails(20) }

	var leader, standby string
	waitFor(ctx, t, "both replicas to be ready, the leader's Pod alone labelled", explain, func() (bool, error) {
		pods, err := podsByName(ctx, names)
		if err != nil || !testkubelet.PodReady(pods[names[0]]) || !testkubelet.PodReady(pods[names[1]]) {
			return false, err
		}
		labelled := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !isLabelledLeader(pods[n]) })
		if len(labelled) != 1 {
			return false, nil
		}
		leader, standby = labelled[0], names[0]
		if standby == leader {
			standby = names[1]
		}
		return true, nil
	})

	if err := kubelet.Crash(leader); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the standby to lead and label its Pod", explain, func() (bool, error) {
		pods, err := podsByName(ctx, names)
		return err == nil && isLabelledLeader(pods[standby]) && testkubelet.PodReady(pods[standby]), err
	})
	waitFor(ctx, t, "the crashed replica to restart, clear its Pod's label and be ready", explain, func() (bool, error) {
		pods, err := podsByName(ctx, names)
		if err != nil {
			return false, err
		}
		old := pods[leader]
		restarted := len(old.Status.ContainerStatuses) == 1 && old.Status.ContainerStatuses[0].RestartCount == 1
		return restarted && testkubelet.PodReady(old) && !isLabelledLeader(old) && isLabelledLeader(pods[standby]), nil
	})
	if logs := kubelet.LogTails(10000); strings.Contains(logs, "forbidden") {
		t.Errorf("an operator replica was refused a request; config/rbac lacks a right:\n%s", logs)
	}
}

func podsByName(ctx context.Context, names []string) (map[string]*corev1.Pod, error) {
	out := map[string]*corev1.Pod{}
	for _, name := range names {
		pod := &corev1.Pod{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "kcp-system", Name: name}, pod); err != nil {
			return nil, err
		}
		out[name] = pod
	}
	return out, nil
}

func isLabelledLeader(pod *corev1.Pod) bool { return pod.Labels[leaderpod.Label] == "true" }

func describePods(ctx context.Context, names []string) string {
	pods, err := podsByName(ctx, names)
	if err != nil {
		return err.Error() + "\n"
	}
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s: ready %v, labels %v\n", name, testkubelet.PodReady(pods[name]), pods[name].Labels)
	}
	return b.String()
}

func namespaceObject(name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	ns.Name = name
	return ns
}

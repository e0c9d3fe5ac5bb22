package ha

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/leaderpod"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testkubelet"
)

// rolloutTimeout covers two operator pods starting one after the other on
// two loaded cores, each with a probe period to wait, twice (install and
// rolling update), with room.
const rolloutTimeout = 4 * time.Minute

// TestDeploymentIsAvailableWithAStandbyAndRollsWithALeader installs the
// chart's Deployment with two replicas and lets the real
// kube-controller-manager judge it: a test kubelet runs its Pods as operator
// processes and writes their readiness from their /readyz. The Deployment
// must become Available with one leader and one ready standby, the
// listener's Service must reach the leader alone, and a rolling update must
// complete (the new ReplicaSet fully available, the old one at 0) and leave
// a leader. The time without a leader during the update is printed.
func TestDeploymentIsAvailableWithAStandbyAndRollsWithALeader(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clientset, err := kubernetes.NewForConfig(env.kcp.Config())
	g.Expect(err).NotTo(HaveOccurred())

	// A namespace of its own: its own Lease, no Kymas, nothing shared with
	// the package's other tests or with earlier runs (-count).
	ns := "ha-deploy-" + rand.String(5)
	g.Expect(env.kcpClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	stopControllers, err := env.kcp.StartControllerManager(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = stopControllers() })

	deploy := applyChartManager(t, ns)
	selector := labels.SelectorFromSet(deploy.Spec.Selector.MatchLabels)
	kubelet, err := testkubelet.Start(ctx, testkubelet.Options{
		Client: clientset, Namespace: ns, Selector: selector, NodeName: "node-" + ns,
		Binary: env.bin, ExtraArgs: []string{"--kubeconfig=" + env.kcp.KubeconfigPath()},
		Dir: t.TempDir(), ReadinessPeriod: time.Second,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(kubelet.Stop)
	t.Cleanup(func() { removeDeployment(t, clientset, deploy, selector) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator pods:\n%s", kubelet.LogTails(20))
		}
	})

	g.Eventually(func(g Gomega) { expectRolledOut(g, clientset, deploy) }, rolloutTimeout, interval).Should(Succeed(),
		"the Deployment with a leader and a standby is not Available")
	first := eventuallyOneLeader(g, clientset, kubelet, deploy)

	leases := watchLease(t, clientset, ns, leaseName)
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"test.operator.kyma-project.io/rollout":"` + rand.String(8) + `"}}}}}`)
	_, err = clientset.AppsV1().Deployments(ns).Patch(ctx, deploy.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { expectRolledOut(g, clientset, deploy) }, rolloutTimeout, interval).Should(Succeed(),
		"the rolling update did not complete")
	second := eventuallyOneLeader(g, clientset, kubelet, deploy)
	g.Expect(second).NotTo(Equal(first), "the old leader's Pod is gone, yet it leads")

	for _, r := range leases.records() {
		t.Logf("Lease: holder %q acquired %s renewed %s", r.holder, r.acquire.Format(time.StampMilli), r.renewed.Format(time.StampMilli))
	}
	gaps := leaderGaps(leases.records())
	// The old leader's Pod costs more to delete (leaderpod.DeletionCost):
	// the old standby goes first, and leadership moves once.
	g.Expect(gaps).To(HaveLen(1), "the Lease did not pass from the old leader to a new one exactly once")
	for _, gap := range gaps {
		fmt.Printf("rolling update of 2 replicas: time without a leader %s (Lease: old holder's last renewal or release to the new holder's acquisition)\n", gap.Round(time.Millisecond))
	}
}

// leaseName is the Lease of an unsharded operator.
const leaseName = "lifecycle-manager.operator.kyma-project.io"

// applyChartManager renders the chart into ns with two replicas and
// creates its manager objects (the Deployment, the Services, the PKI
// namespace); it returns the Deployment.
func applyChartManager(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := install.RenderChart(filepath.Join(root, "charts", "lifecycle-manager"), ns, map[string]any{
		"replicas": 2, "pkiNamespace": ns + "-pki",
	})
	if err != nil {
		t.Fatal(err)
	}
	var deploy *appsv1.Deployment
	for name, objs := range rendered.Templates {
		if !strings.HasPrefix(name, "manager/") {
			continue
		}
		for _, obj := range objs {
			if err := env.kcpClient.Create(context.Background(), obj.DeepCopy()); err != nil {
				t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == "Deployment" {
				deploy = &appsv1.Deployment{}
				if err := env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(obj), deploy); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if deploy == nil {
		t.Fatal("the chart rendered no Deployment")
	}
	return deploy
}

// expectRolledOut is `kubectl rollout status`: the controller saw the
// latest spec, every replica is updated and available, no old one is left,
// and the Deployment is Available.
func expectRolledOut(g Gomega, clientset kubernetes.Interface, deploy *appsv1.Deployment) {
	ctx := context.Background()
	d, err := clientset.AppsV1().Deployments(deploy.Namespace).Get(ctx, deploy.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
	want := ptr.Deref(d.Spec.Replicas, 1)
	g.Expect(d.Status.UpdatedReplicas).To(Equal(want))
	g.Expect(d.Status.AvailableReplicas).To(Equal(want))
	g.Expect(d.Status.Replicas).To(Equal(want), "old pods are left")
	available := false
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available = c.Status == corev1.ConditionTrue
		}
	}
	g.Expect(available).To(BeTrue(), "the Deployment is not Available: %v", d.Status.Conditions)

	// The current ReplicaSet holds every replica, ready; the old ones none.
	sets, err := clientset.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()})
	g.Expect(err).NotTo(HaveOccurred())
	current := 0
	for _, rs := range sets.Items {
		if rs.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
			current++
			g.Expect(rs.Status.AvailableReplicas).To(Equal(want), "the new ReplicaSet %s is not fully available", rs.Name)
		} else {
			g.Expect(ptr.Deref(rs.Spec.Replicas, 0)).To(BeZero(), "the old ReplicaSet %s is not scaled to 0", rs.Name)
			g.Expect(rs.Status.Replicas).To(BeZero(), "the old ReplicaSet %s still has pods", rs.Name)
		}
	}
	g.Expect(current).To(Equal(1))
}

// eventuallyOneLeader waits until one Pod of the Deployment leads (its
// metrics say so) and carries the leader label, every other Pod is a ready
// standby without it, and the listener Service's endpoints are the
// leader's alone. It returns the leader's Pod name.
func eventuallyOneLeader(g Gomega, clientset kubernetes.Interface, kubelet *testkubelet.Kubelet, deploy *appsv1.Deployment) string {
	var leader string
	g.Eventually(func(g Gomega) {
		ctx := context.Background()
		pods, err := clientset.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(deploy.Spec.Selector.MatchLabels).String()})
		g.Expect(err).NotTo(HaveOccurred())
		var leaders, labelled []string
		for _, pod := range pods.Items {
			g.Expect(pod.DeletionTimestamp).To(BeNil(), "pod %s is terminating", pod.Name)
			g.Expect(testkubelet.PodReady(&pod)).To(BeTrue(), "pod %s is not ready", pod.Name)
			if leads(g, kubelet.Address(pod.Name, "metrics")) {
				leaders = append(leaders, pod.Name)
			}
			if pod.Labels[leaderpod.Label] == "true" {
				labelled = append(labelled, pod.Name)
			}
		}
		g.Expect(leaders).To(HaveLen(1), "one process leads")
		g.Expect(labelled).To(Equal(leaders), "the leader's Pod alone carries the leader label")
		g.Expect(listenerEndpoints(g, clientset, deploy.Namespace)).To(ConsistOf(leaders[0]), "the listener's Service reaches the leader alone")
		leader = leaders[0]
	}, rolloutTimeout, interval).Should(Succeed())
	return leader
}

// leads reads controller-runtime's leader_election_master_status from the
// process's metrics.
func leads(g Gomega, metricsAddress string) bool {
	g.Expect(metricsAddress).NotTo(BeEmpty())
	resp, err := http.Get("http://" + metricsAddress + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		if line := scanner.Text(); strings.HasPrefix(line, "leader_election_master_status{") {
			return strings.HasSuffix(line, " 1")
		}
	}
	return false
}

// listenerEndpoints are the Pods the listener Service's EndpointSlices
// list as ready, as the real EndpointSlice controller computes them.
func listenerEndpoints(g Gomega, clientset kubernetes.Interface, ns string) []string {
	endpointSlices, err := clientset.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=lifecycle-manager-listener",
	})
	g.Expect(err).NotTo(HaveOccurred())
	var pods []string
	for _, s := range endpointSlices.Items {
		for _, e := range s.Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) && e.TargetRef != nil {
				pods = append(pods, e.TargetRef.Name)
			}
		}
	}
	return pods
}

// removeDeployment deletes the Deployment and waits until its Pods are
// gone (the garbage collector removes its ReplicaSets, the kubelet stops
// their processes), so that nothing of this test outlives it.
func removeDeployment(t *testing.T, clientset kubernetes.Interface, deploy *appsv1.Deployment, selector labels.Selector) {
	ctx := context.Background()
	_ = clientset.AppsV1().Deployments(deploy.Namespace).Delete(ctx, deploy.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	NewWithT(t).Eventually(func(g Gomega) {
		pods, err := clientset.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(BeEmpty())
	}, rolloutTimeout, interval).Should(Succeed(), "the Deployment's pods were not removed")
}

// leaseRecord is one state of the Lease, as a watch saw it.
type leaseRecord struct {
	holder           string
	acquire, renewed time.Time
}

// leaseWatch records every state of a Lease.
type leaseWatch struct {
	mu   sync.Mutex
	seen []leaseRecord
}

func (w *leaseWatch) records() []leaseRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// watchLease records the states of the Lease until the test ends.
func watchLease(t *testing.T, clientset kubernetes.Interface, ns, name string) *leaseWatch {
	t.Helper()
	w, err := clientset.CoordinationV1().Leases(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	lw := &leaseWatch{}
	go func() {
		for ev := range w.ResultChan() {
			lease, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			r := leaseRecord{holder: ptr.Deref(lease.Spec.HolderIdentity, "")}
			if lease.Spec.AcquireTime != nil {
				r.acquire = lease.Spec.AcquireTime.Time
			}
			if lease.Spec.RenewTime != nil {
				r.renewed = lease.Spec.RenewTime.Time
			}
			lw.mu.Lock()
			lw.seen = append(lw.seen, r)
			lw.mu.Unlock()
		}
	}()
	return lw
}

// leaderGaps are the times without a leader in a sequence of Lease states:
// from the moment the old holder last renewed the Lease, or released it
// (client-go stamps the release as a renewal without a holder), to the
// moment the next holder acquired it. The old holder may have led a little
// past its last renewal, so a gap is at most this long.
func leaderGaps(records []leaseRecord) []time.Duration {
	var gaps []time.Duration
	var holder string
	var lastLed time.Time
	for _, r := range records {
		switch r.holder {
		case "":
			if !r.renewed.IsZero() {
				lastLed = r.renewed
			}
		case holder:
			lastLed = r.renewed
		default:
			if holder != "" || !lastLed.IsZero() {
				gaps = append(gaps, r.acquire.Sub(lastLed))
			}
			holder, lastLed = r.holder, r.renewed
		}
	}
	return gaps
}

func TestLeaderGaps(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	for _, tc := range []struct {
		name    string
		records []leaseRecord
		want    []time.Duration
	}{
		{name: "one holder renewing", records: []leaseRecord{{"a", at(0), at(0)}, {"a", at(0), at(2)}}},
		{
			name:    "released, then taken",
			records: []leaseRecord{{"a", at(0), at(2)}, {"", at(3), at(3)}, {"b", at(5), at(5)}},
			want:    []time.Duration{2 * time.Second},
		},
		{
			name:    "ran out, then taken",
			records: []leaseRecord{{"a", at(0), at(4)}, {"b", at(20), at(20)}},
			want:    []time.Duration{16 * time.Second},
		},
		{
			name:    "two handovers",
			records: []leaseRecord{{"a", at(0), at(2)}, {"", at(2), at(2)}, {"b", at(3), at(3)}, {"b", at(3), at(5)}, {"", at(6), at(6)}, {"c", at(10), at(10)}},
			want:    []time.Duration{time.Second, 4 * time.Second},
		},
		{name: "first holder", records: []leaseRecord{{"a", at(0), at(0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leaderGaps(tc.records); !slices.Equal(got, tc.want) {
				t.Errorf("leaderGaps = %v, want %v", got, tc.want)
			}
		})
	}
}

package ha

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

const (
	shards = 2
	// timeout covers a leader's Lease running out (15 s) on two loaded
	// cores, with room.
	timeout  = 2 * time.Minute
	interval = 200 * time.Millisecond
)

// process is one operator process.
type process struct {
	name    string
	logPath string
	cmd     *testcluster.Command
}

// startShard starts a process of shard shardID of shards.
func startShard(t *testing.T, name string, shardID int) *process {
	t.Helper()
	return startShardOf(t, name, shards, shardID)
}

// startShardOf starts a process of shard shardID of count, with extra flags.
func startShardOf(t *testing.T, name string, count, shardID int, extra ...string) *process {
	t.Helper()
	return startProcess(t, name, env.bin, append([]string{"--shards=" + strconv.Itoa(count), "--shard-id=" + strconv.Itoa(shardID)}, extra...)...)
}

// startProcess starts the operator binary bin with leader election, the
// test's intervals and extra flags.
func startProcess(t *testing.T, name, bin string, extra ...string) *process {
	t.Helper()
	p := &process{name: name, logPath: filepath.Join(env.dir, name+".log")}
	args := []string{
		"--kubeconfig=" + env.kcp.KubeconfigPath(),
		"--namespace=" + kcpNamespace,
		"--leader-elect",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--listener-address=0",
		"--requeue-ready=2s",
		"--requeue-processing=300ms",
		"--requeue-error=1s",
		"--backoff-max=5s",
		"--insecure-registries=" + env.registry.Host(),
		// Every reconcile is logged (controller-runtime, V(5)), as JSON:
		// the logs say which process worked on which object.
		"--zap-log-level=5",
		"--zap-devel=false",
		"--zap-stacktrace-level=panic",
	}
	cmd, err := testcluster.StartCommand(bin, append(args, extra...), p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s's log:\n%s", p.name, p.cmd.LogTail(30))
		}
		_ = p.cmd.Kill()
	})
	return p
}

// reconciled are the objects the process reconciled, by controller, as
// its log says. The log file is shared with earlier runs of the test
// (-count), whose processes reconciled the same Kymas; only this
// process's lines count.
func (p *process) reconciled(t *testing.T) map[string]map[string]bool {
	t.Helper()
	data, err := p.cmd.Log()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line struct {
			Msg        string `json:"msg"`
			Controller string `json:"controller"`
			Name       string `json:"name"`
		}
		if json.Unmarshal(scanner.Bytes(), &line) != nil || line.Msg != "Reconciling" {
			continue
		}
		if out[line.Controller] == nil {
			out[line.Controller] = map[string]bool{}
		}
		out[line.Controller][line.Name] = true
	}
	return out
}

// workedOn are the Kymas among kymas whose Kyma, Manifest, catalog or
// agent reconcile the process ran. Filing an object under its shard bucket
// is no work on it: a shard files a Kyma labelled with its bucket by hand,
// whichever shard the Kyma is of.
func (p *process) workedOn(t *testing.T, kymas []string) []string {
	t.Helper()
	reconciled := p.reconciled(t)
	var out []string
	for _, k := range kymas {
		for controller, names := range reconciled {
			if strings.HasPrefix(controller, "shard-filer-") {
				continue
			}
			name := k
			if controller == "manifest" {
				name = kyma.ManifestName(k, samplemodules.Evolving)
			}
			if names[name] {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// leaseHeld waits until the shard's Lease has a holder and returns it.
func leaseHeld(g Gomega, shardID int) string {
	holder := leaseHolder(g, shardID)
	g.Expect(holder).NotTo(BeEmpty())
	return holder
}

// leaseHolder is the holder of the shard's Lease, empty when there is no
// Lease or no holder.
func leaseHolder(g Gomega, shardID int) string {
	return leaseHolderOf(g, shards, shardID)
}

// leaseHolderOf is the holder of the Lease of shard shardID of count.
func leaseHolderOf(g Gomega, count, shardID int) string {
	lease := &coordinationv1.Lease{}
	name := shard.Shard{Count: count, ID: shardID}.LeaseName("lifecycle-manager.operator.kyma-project.io")
	err := env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: name}, lease)
	if apierrors.IsNotFound(err) {
		return ""
	}
	g.Expect(err).NotTo(HaveOccurred())
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// kymaNames picks n Kyma names of each shard.
func kymaNames(n int) [][]string {
	names := make([][]string, shards)
	for i := 0; len(names[0]) < n || len(names[1]) < n; i++ {
		name := fmt.Sprintf("ha-%d", i)
		if s := shard.Of(name, shards); len(names[s]) < n {
			names[s] = append(names[s], name)
		}
	}
	return names
}

// TestShardsSplitTheFleetAndAStandbyTakesOver runs three processes: one
// for shard 0, a leader and a standby for shard 1. Each Kyma must be worked
// on by its shard's leader alone; after the leader of shard 1 is killed
// with SIGKILL, the standby takes its Kymas over and heals drift made
// meanwhile, without recreating a Manifest or reinstalling a module.
func TestShardsSplitTheFleetAndAStandbyTakesOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	names := kymaNames(runtimeCount / shards)
	all := append(append([]string{}, names[0]...), names[1]...)

	// An earlier run of this test (-count) leaves shard 1's Lease held by
	// its killed standby until the Lease runs out.
	var staleID string
	g.Eventually(func(g Gomega) { staleID = leaseHolder(g, 1) }, timeout, interval).Should(Succeed())
	zero := startShard(t, "shard-0", 0)
	leader := startShard(t, "shard-1-leader", 1)
	// The standby starts once the leader holds the Lease, so which of the
	// two leads is known: a holder other than the stale one can only be
	// the leader, the one process of shard 1 so far.
	var leaderID string
	g.Eventually(func(g Gomega) {
		leaderID = leaseHeld(g, 1)
		g.Expect(leaderID).NotTo(Equal(staleID), "shard 1's Lease is still held by a process of an earlier run")
	}, timeout, interval).Should(Succeed())
	standby := startShard(t, "shard-1-standby", 1)

	runtimeOf := map[string]*testcluster.Runtime{}
	for i, name := range all {
		runtimeOf[name] = env.runtimes[i]
		createKyma(t, name, env.runtimes[i])
	}
	for _, name := range all {
		eventuallyReady(g, name)
	}

	g.Expect(zero.workedOn(t, all)).To(ConsistOf(names[0]), "the process of shard 0 worked on exactly the Kymas of shard 0")
	g.Expect(leader.workedOn(t, all)).To(ConsistOf(names[1]), "the leader of shard 1 worked on exactly the Kymas of shard 1")
	g.Expect(standby.reconciled(t)).To(BeEmpty(), "the standby of shard 1 reconciled nothing while the leader lived")

	manifests := manifestUIDs(g)
	objects := map[string]map[string]types.UID{}
	for _, name := range all {
		objects[name] = moduleObjects(g, runtimeOf[name])
		g.Expect(objects[name]).NotTo(BeEmpty())
	}

	// The leader dies like a node does; meanwhile a module object in one of
	// its runtimes is deleted by hand.
	g.Expect(leader.cmd.Kill()).To(Succeed())
	drifted := names[1][0]
	var deleted string
	for key := range objects[drifted] {
		deleted = key
		break
	}
	ns, name := splitKey(deleted)
	rt, err := runtimeClient(runtimeOf[drifted])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rt.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(leaseHeld(g, 1)).NotTo(Equal(leaderID))
	}, timeout, interval).Should(Succeed(), "the standby took the Lease of shard 1 over")
	g.Eventually(func(g Gomega) {
		now := moduleObjects(g, runtimeOf[drifted])
		g.Expect(now).To(HaveKey(deleted))
	}, timeout, interval).Should(Succeed(), "the standby put back the module object deleted in the runtime of "+drifted)
	g.Expect(standby.workedOn(t, all)).To(ConsistOf(names[1]), "the standby, now leader, worked on exactly the Kymas of shard 1")
	g.Expect(zero.workedOn(t, all)).To(ConsistOf(names[0]), "the process of shard 0 never touched a Kyma of shard 1")

	for _, name := range all {
		eventuallyReady(g, name)
		now := moduleObjects(g, runtimeOf[name])
		for key, uid := range objects[name] {
			if key == deleted {
				continue
			}
			g.Expect(now).To(HaveKeyWithValue(key, uid), "module object %s of %s was recreated: reinstalled", key, name)
		}
	}
	g.Expect(manifestUIDs(g)).To(Equal(manifests), "no Manifest was recreated")
	g.Expect(zero.cmd.ExitError()).NotTo(HaveOccurred())
	g.Expect(standby.cmd.ExitError()).NotTo(HaveOccurred())
}

// createKyma registers the runtime under a new Kyma with the evolving
// module. The Kyma is deleted at the end of the test, which must uninstall
// the module; release does that earlier, while an operator still runs.
func createKyma(t *testing.T, name string, rt *testcluster.Runtime) (release func()) {
	t.Helper()
	return createLabelledKyma(t, name, rt, nil)
}

// createLabelledKyma is createKyma, with labels of the Kyma's own besides
// its runtime id.
func createLabelledKyma(t *testing.T, name string, rt *testcluster.Runtime, labels map[string]string) (release func()) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": rt.Kubeconfig()},
	}
	if err := env.kcpClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	k := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: name}},
		Spec: v1beta2.KymaSpec{Channel: "regular", Modules: []v1beta2.Module{{
			Name: samplemodules.Evolving, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
		}}},
	}
	maps.Copy(k.Labels, labels)
	if err := env.kcpClient.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	release = func() {
		// Deleting the Kyma must uninstall its module, whichever process
		// leads its shard by then.
		_ = env.kcpClient.Delete(ctx, k)
		g := NewWithT(t)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(k), &v1beta2.Kyma{}))
		}, timeout, interval).Should(BeTrue(), "Kyma "+name+" was not deleted")
		_ = env.kcpClient.Delete(ctx, secret)
	}
	t.Cleanup(release)
	return release
}

func eventuallyReady(g Gomega, name string) {
	g.Eventually(func(g Gomega) {
		k := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
		g.Expect(k.Status.State).To(Equal(v1beta2.StateReady), testenv.DescribeKyma(k))
	}, timeout, interval).Should(Succeed())
}

func manifestUIDs(g Gomega) map[string]types.UID {
	list := &v1beta2.ManifestList{}
	g.Expect(env.kcpClient.List(context.Background(), list, client.InNamespace(kcpNamespace))).To(Succeed())
	out := map[string]types.UID{}
	for _, m := range list.Items {
		out[m.Name] = m.UID
	}
	return out
}

// moduleObjects are the ConfigMaps the module created in the runtime,
// namespace/name to UID.
func moduleObjects(g Gomega, rt *testcluster.Runtime) map[string]types.UID {
	c, err := runtimeClient(rt)
	g.Expect(err).NotTo(HaveOccurred())
	list := &corev1.ConfigMapList{}
	g.Expect(c.List(context.Background(), list, client.MatchingLabels{v1beta2.ModuleNameLabel: samplemodules.Evolving})).To(Succeed())
	out := map[string]types.UID{}
	for _, cm := range list.Items {
		out[cm.Namespace+"/"+cm.Name] = cm.UID
	}
	return out
}

func runtimeClient(rt *testcluster.Runtime) (client.Client, error) {
	return testenv.NewClient(rt.Config())
}

func splitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}

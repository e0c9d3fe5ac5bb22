package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

const (
	// timeout bounds every convergence; generous, because two loaded cores
	// also restart API servers and etcd in these tests.
	timeout  = 2 * time.Minute
	interval = 200 * time.Millisecond
)

// runtimeHandle is one kwok runtime with its clients.
type runtimeHandle struct {
	name    string
	cluster *testcluster.Runtime
	client  client.Client
	// meta lists objects by resource without a REST mapper, which would
	// cache kinds across the runtime being replaced.
	meta metadata.Interface
}

func newRuntimeHandle(name string, r *testcluster.Runtime) (*runtimeHandle, error) {
	c, err := testenv.NewClient(r.Config())
	if err != nil {
		return nil, err
	}
	m, err := metadata.NewForConfig(r.Config())
	if err != nil {
		return nil, err
	}
	return &runtimeHandle{name: name, cluster: r, client: c, meta: m}, nil
}

// testKyma is a Kyma of one test in one runtime.
type testKyma struct {
	name    string
	runtime *runtimeHandle
}

// module is a Kyma module entry with the API's defaults.
func module(name string) v1beta2.Module {
	return v1beta2.Module{Name: name, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete}
}

func modules(names ...string) []v1beta2.Module {
	out := make([]v1beta2.Module, 0, len(names))
	for _, n := range names {
		out = append(out, module(n))
	}
	return out
}

// newKyma registers the runtime under a new Kyma with the modules. At the
// end of the test the Kyma is deleted, which must uninstall everything.
func newKyma(t *testing.T, name string, rt *runtimeHandle, mods ...v1beta2.Module) *testKyma {
	t.Helper()
	ctx := context.Background()
	k := &testKyma{name: name, runtime: rt}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-kubeconfig", Namespace: kcpNamespace,
			Labels: map[string]string{v1beta2.KymaNameLabel: name},
		},
		Data: map[string][]byte{"config": rt.cluster.Kubeconfig()},
	}
	Expect(env.kcpClient.Create(ctx, secret)).To(Succeed())
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: rt.name}},
		Spec:       v1beta2.KymaSpec{Channel: "regular", Modules: mods},
	}
	Expect(env.kcpClient.Create(ctx, kyma)).To(Succeed())
	t.Cleanup(func() { k.release(t) })
	return k
}

// release deletes the Kyma, with every gate open, and checks that nothing
// of it is left in the runtime. After a failure it only tries, briefly, so
// that one failure does not hide behind the next.
func (k *testKyma) release(t *testing.T) {
	ctx := context.Background()
	env.gates.set(true, gatedRange(0, gatedModules)...)
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}}
	_ = client.IgnoreNotFound(env.kcpClient.Delete(ctx, kyma))
	wait := timeout
	if t.Failed() {
		wait = 20 * time.Second
	}
	g := NewWithT(t)
	ok := g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, wait, interval).Should(BeTrue(), func() string { return "Kyma " + k.name + " was not deleted: " + testenv.DescribeKyma(kyma) })
	_ = env.kcpClient.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: k.name})
	if ok {
		k.expectNothingLeft(g)
	}
}

// expectNothingLeft checks that the runtime holds nothing of the Kyma's
// modules, nor the runtime's Kyma, and the control plane no Manifest of it.
func (k *testKyma) expectNothingLeft(g Gomega) {
	g.Eventually(func(g Gomega) {
		g.Expect(k.runtimeObjects(g)).To(BeEmpty(), "module objects of the deleted Kyma %s are left in %s", k.name, k.runtime.name)
		g.Expect(k.manifestList(g)).To(BeEmpty(), "Manifests of the deleted Kyma %s are left", k.name)
		err := k.runtime.client.Get(context.Background(), runtimeKymaKey, &v1beta2.Kyma{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the runtime's Kyma is removed with the control plane's: %v", err)
	}, 10*time.Second, interval).Should(Succeed())
}

func (k *testKyma) get(g Gomega) *v1beta2.Kyma {
	kyma := &v1beta2.Kyma{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, kyma)).To(Succeed())
	return kyma
}

// update changes the Kyma's spec, retrying on conflicts.
func (k *testKyma) update(change func(*v1beta2.Kyma)) {
	Eventually(func(g Gomega) {
		kyma := k.get(g)
		change(kyma)
		g.Expect(env.kcpClient.Update(context.Background(), kyma)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// addModules adds modules to the Kyma's spec.
func (k *testKyma) addModules(names ...string) {
	k.update(func(kyma *v1beta2.Kyma) { kyma.Spec.Modules = append(kyma.Spec.Modules, modules(names...)...) })
}

// setPaused sets or removes the Kyma's skip-reconciliation label and, when
// pausing, waits until the operator says it stopped (condition Paused), so
// that no reconcile is still running.
func (k *testKyma) setPaused(paused bool) {
	k.update(func(kyma *v1beta2.Kyma) {
		if paused {
			kyma.Labels[v1beta2.SkipReconciliationLabel] = "true"
		} else {
			delete(kyma.Labels, v1beta2.SkipReconciliationLabel)
		}
	})
	if !paused {
		return
	}
	Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.Conditions).To(ContainElement(And(HaveField("Type", "Paused"), HaveField("Status", metav1.ConditionTrue))), testenv.DescribeKyma(kyma))
	}, timeout, interval).Should(Succeed())
}

// moduleStates returns each module's state in the Kyma's status.
func (k *testKyma) moduleStates(g Gomega) (*v1beta2.Kyma, map[string]v1beta2.State) {
	kyma := k.get(g)
	states := map[string]v1beta2.State{}
	for _, m := range kyma.Status.Modules {
		states[m.Name] = m.State
	}
	return kyma, states
}

// eventuallyReady waits until the Kyma and every listed module are Ready.
func (k *testKyma) eventuallyReady(names ...string) {
	Eventually(func(g Gomega) {
		kyma, states := k.moduleStates(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), "Kyma %s: %s", k.name, testenv.DescribeKyma(kyma))
		for _, n := range names {
			g.Expect(states).To(HaveKeyWithValue(n, v1beta2.StateReady), "Kyma %s: %s", k.name, testenv.DescribeKyma(kyma))
		}
	}, timeout, interval).Should(Succeed())
}

// eventuallyMidInstall waits until the modules in ready are Ready and those
// in waiting are installed (their custom resource exists in the runtime) but
// Processing, waiting for their module operator: an install half done.
func (k *testKyma) eventuallyMidInstall(ready, waiting []string) {
	Eventually(func(g Gomega) {
		kyma, states := k.moduleStates(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateProcessing), "Kyma %s: %s", k.name, testenv.DescribeKyma(kyma))
		for _, n := range ready {
			g.Expect(states).To(HaveKeyWithValue(n, v1beta2.StateReady), "Kyma %s: %s", k.name, testenv.DescribeKyma(kyma))
		}
		for _, n := range waiting {
			g.Expect(states).To(HaveKeyWithValue(n, v1beta2.StateProcessing), "Kyma %s: %s", k.name, testenv.DescribeKyma(kyma))
		}
		objects := k.runtimeObjects(g)
		for _, n := range waiting {
			g.Expect(objects).To(HaveKey(gatedCRKey(n)), "module %s is installed, waiting for its operator", n)
		}
	}, timeout, interval).Should(Succeed())
}

// manifestList lists the Kyma's Manifests in the control plane.
func (k *testKyma) manifestList(g Gomega) []v1beta2.Manifest {
	list := &v1beta2.ManifestList{}
	g.Expect(env.kcpClient.List(context.Background(), list, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
	return list.Items
}

// manifests returns the UID of the Kyma's one Manifest per module, and
// fails if a module has more than one or the modules are not exactly names.
func (k *testKyma) manifests(g Gomega, names ...string) map[string]types.UID {
	uids := map[string]types.UID{}
	for _, m := range k.manifestList(g) {
		module := m.Labels[v1beta2.ModuleNameLabel]
		g.Expect(uids).NotTo(HaveKey(module), "Kyma %s has two Manifests for module %s", k.name, module)
		uids[module] = m.UID
	}
	want := append([]string(nil), names...)
	sort.Strings(want)
	g.Expect(sortedKeys(uids)).To(Equal(want), "Kyma %s has one Manifest per module", k.name)
	return uids
}

// expectSameManifests checks, now, that the Kyma has exactly one Manifest per
// module and that those in before were not recreated.
func (k *testKyma) expectSameManifests(before map[string]types.UID, names ...string) {
	after := k.manifests(Default, names...)
	for module, uid := range before {
		Expect(after).To(HaveKeyWithValue(module, uid), "the Manifest of %s was recreated", module)
	}
}

var (
	configMapResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	// runtimeKymaKey names the runtime's own Kyma.
	runtimeKymaKey = client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}
)

// runtimeObjects maps each of the Kyma's module objects in its runtime
// (ConfigMaps, CRDs, the custom resources of those CRDs) to its UID.
func (k *testKyma) runtimeObjects(g Gomega) map[string]types.UID {
	ctx := context.Background()
	// Module objects carry both labels; the runtime's own Kyma CRDs only
	// the Kyma's.
	selector := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s,%s", v1beta2.KymaNameLabel, k.name, v1beta2.ModuleNameLabel)}
	objects := map[string]types.UID{}
	configMaps, err := k.runtime.meta.Resource(configMapResource).List(ctx, selector)
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range configMaps.Items {
		objects["ConfigMap "+o.Namespace+"/"+o.Name] = o.UID
	}
	crds, err := k.runtime.meta.Resource(crdResource).List(ctx, selector)
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range crds.Items {
		objects["CustomResourceDefinition "+crd.Name] = crd.UID
		plural, group, _ := strings.Cut(crd.Name, ".")
		if group != gatedGroup {
			continue
		}
		crs, err := k.runtime.meta.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // the CRD is being deleted
		}
		g.Expect(err).NotTo(HaveOccurred())
		for _, cr := range crs.Items {
			objects[plural+" "+cr.Namespace+"/"+cr.Name] = cr.UID
		}
	}
	return objects
}

// gatedCRKey is the runtimeObjects key of a gated module's custom resource.
func gatedCRKey(module string) string {
	word := strings.TrimPrefix(module, "gated-")
	return "gated" + word + "s " + v1beta2.DefaultRuntimeNamespace + "/" + module
}

// expectNoneDeleted checks that every object of before is still there with
// the same UID: nothing was deleted, nothing reinstalled.
func expectNoneDeleted(before, after map[string]types.UID) {
	expectNoneDeletedG(Default, before, after)
}

func expectNoneDeletedG(g Gomega, before, after map[string]types.UID) {
	var lost []string
	for key, uid := range before {
		if after[key] != uid {
			lost = append(lost, key)
		}
	}
	sort.Strings(lost)
	g.Expect(lost).To(BeEmpty(), "module objects deleted or recreated (before: %d objects, after: %d)", len(before), len(after))
}

// moduleKeys are the runtimeObjects keys of a module's objects: two
// ConfigMaps, and a gated module's CRD and custom resource.
func moduleKeys(module string) []string {
	keys := []string{
		"ConfigMap " + v1beta2.DefaultRuntimeNamespace + "/" + module + "-config",
		"ConfigMap " + v1beta2.DefaultRuntimeNamespace + "/" + module + "-extra",
	}
	if strings.HasPrefix(module, "gated-") {
		cr := gatedCRKey(module)
		plural, _, _ := strings.Cut(cr, " ")
		keys = append(keys, cr, "CustomResourceDefinition "+plural+"."+gatedGroup)
	}
	return keys
}

// expectObjectsOf checks that objects hold every object of the modules.
func expectObjectsOf(g Gomega, objects map[string]types.UID, names ...string) {
	for _, n := range names {
		for _, key := range moduleKeys(n) {
			g.Expect(objects).To(HaveKey(key), "module %s is installed", n)
		}
	}
}

// expectNoObjectsOf checks that objects hold nothing of the modules.
func expectNoObjectsOf(g Gomega, objects map[string]types.UID, names ...string) {
	for _, n := range names {
		for _, key := range moduleKeys(n) {
			g.Expect(objects).NotTo(HaveKey(key), "module %s is removed", n)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// waitForOperatorError waits until the operator logged a failed reconcile
// after mark: proof that it met the fault, not only that the fault exists.
func waitForOperatorError(mark int64) {
	Eventually(func() string { return env.operator.logSince(mark) }, timeout, interval).
		Should(ContainSubstring("Reconciler error"), "the operator has not yet met the fault")
}

package templateoperator_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
	"github.com/runtime-fleet/lifecycle-manager/pkg/declarative"
)

// The operator runs against one real kube-apiserver for the package, its
// CRD installed as the lifecycle manager would install it; a namespace per test.
var c client.Client

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{"config/crd"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	if c, err = testenv.NewClient(cp.Config()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() {
		done <- templateoperator.Run(ctx, cp.Config(), templateoperator.RunOptions{CRDPoll: 100 * time.Millisecond})
	}()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "template operator:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		spec map[string]any
		want string
	}{
		{"the greeting", map[string]any{"greeting": "hi there"}, "hi there"},
		{"the default greeting", nil, "hello"},
		{"YAML in the greeting stays text", map[string]any{"greeting": "a: [b"}, "a: [b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sample := newSample("ns", "s")
			if tt.spec != nil {
				sample.Object["spec"] = tt.spec
			}
			objs, err := templateoperator.Render(sample)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(objs).To(HaveLen(1))
			g.Expect(objs[0].GetName()).To(Equal("s-greeting"))
			g.Expect(objs[0].GetNamespace()).To(Equal("ns"))
			greeting, _, _ := unstructured.NestedString(objs[0].Object, "data", "greeting")
			g.Expect(greeting).To(Equal(tt.want))
		})
	}
}

func newSample(namespace, name string) *unstructured.Unstructured {
	s := &unstructured.Unstructured{}
	s.SetGroupVersionKind(templateoperator.GVK)
	s.SetNamespace(namespace)
	s.SetName(name)
	return s
}

func newNamespace(t *testing.T, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func stateOf(g Gomega, sample *unstructured.Unstructured) string {
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(sample), sample)).To(Succeed())
	state, _, _ := unstructured.NestedString(sample.Object, "status", "state")
	return state
}

// A Sample gets its ConfigMap and reports Ready with a Ready condition; a
// changed greeting is applied; a deleted Sample takes its ConfigMap with it.
func TestSampleLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newNamespace(t, "lifecycle")
	sample := newSample("lifecycle", "default")
	sample.Object["spec"] = map[string]any{"greeting": "hello"}
	g.Expect(c.Create(ctx, sample)).To(Succeed())

	g.Eventually(func(g Gomega) string { return stateOf(g, sample) }, 30*time.Second, 100*time.Millisecond).Should(Equal("Ready"))
	conds, _, _ := unstructured.NestedSlice(sample.Object, "status", "conditions")
	g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Ready"), HaveKeyWithValue("status", "True"), HaveKeyWithValue("reason", declarative.ReasonInstalled))))
	g.Expect(sample.GetFinalizers()).To(ContainElement(templateoperator.Finalizer))
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: "lifecycle", Name: "default-greeting"}
	g.Expect(c.Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello"))
	g.Expect(cm.Labels).To(HaveKeyWithValue(declarative.OwnerLabel, "lifecycle.default"))
	g.Expect(cm.OwnerReferences).To(HaveLen(1))
	inventory, _, _ := unstructured.NestedSlice(sample.Object, "status", "inventory")
	g.Expect(inventory).To(ConsistOf(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "lifecycle", "name": "default-greeting"}))

	g.Expect(unstructured.SetNestedField(sample.Object, "bonjour", "spec", "greeting")).To(Succeed())
	g.Expect(c.Update(ctx, sample)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		g.Expect(c.Get(ctx, key, cm)).To(Succeed())
		return cm.Data["greeting"]
	}, 30*time.Second, 100*time.Millisecond).Should(Equal("bonjour"))
	g.Eventually(func(g Gomega) any {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(sample), sample)).To(Succeed())
		return sample.Object["status"].(map[string]any)["observedGeneration"]
	}, 30*time.Second, 100*time.Millisecond).Should(BeEquivalentTo(sample.GetGeneration()))

	g.Expect(c.Delete(ctx, sample)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(sample), sample)) }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, key, cm))).To(BeTrue(), "the ConfigMap goes with its Sample, without a garbage collector")
}

// A ConfigMap edited by hand is set right on the next reconcile.
func TestDriftIsCorrected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newNamespace(t, "drift")
	sample := newSample("drift", "default")
	g.Expect(c.Create(ctx, sample)).To(Succeed())
	g.Eventually(func(g Gomega) string { return stateOf(g, sample) }, 30*time.Second, 100*time.Millisecond).Should(Equal("Ready"))
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: "drift", Name: "default-greeting"}
	g.Expect(c.Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello"))
	// A change of the Sample's labels triggers a reconcile that re-applies.
	cm.Data["greeting"] = "tampered"
	g.Expect(c.Update(ctx, cm)).To(Succeed())
	sample.SetLabels(map[string]string{"touch": "1"})
	g.Expect(c.Update(ctx, sample)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		g.Expect(c.Get(ctx, key, cm)).To(Succeed())
		return cm.Data["greeting"]
	}, 30*time.Second, 100*time.Millisecond).Should(Equal("hello"))
}

// An object in the inventory that the manifests no longer have is pruned
// if it is still the Sample's (its owner label), and left alone if not.
func TestPruneByInventory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newNamespace(t, "prune")
	sample := newSample("prune", "default")
	g.Expect(c.Create(ctx, sample)).To(Succeed())
	g.Eventually(func(g Gomega) string { return stateOf(g, sample) }, 30*time.Second, 100*time.Millisecond).Should(Equal("Ready"))

	ours := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "prune", Name: "dropped", Labels: map[string]string{declarative.OwnerLabel: "prune.default"}}}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "prune", Name: "foreign"}}
	g.Expect(c.Create(ctx, ours)).To(Succeed())
	g.Expect(c.Create(ctx, foreign)).To(Succeed())
	before := sample.DeepCopy()
	inventory, _, _ := unstructured.NestedSlice(sample.Object, "status", "inventory")
	for _, name := range []string{"dropped", "foreign"} {
		inventory = append(inventory, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "prune", "name": name})
	}
	g.Expect(unstructured.SetNestedSlice(sample.Object, inventory, "status", "inventory")).To(Succeed())
	g.Expect(c.Status().Patch(ctx, sample, client.MergeFrom(before))).To(Succeed())
	sample.SetLabels(map[string]string{"touch": "1"})
	g.Expect(c.Update(ctx, sample)).To(Succeed())

	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(ours), ours))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the Sample's own object is pruned")
	g.Eventually(func(g Gomega) []any {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(sample), sample)).To(Succeed())
		inventory, _, _ := unstructured.NestedSlice(sample.Object, "status", "inventory")
		return inventory
	}, 30*time.Second, 100*time.Millisecond).Should(HaveLen(1))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed(), "an object without the owner label is left alone")
}

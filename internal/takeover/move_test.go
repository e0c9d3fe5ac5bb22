package takeover_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// rt is a runtime: one real API server for the package, a namespace per
// test. Field ownership is the API server's to compute, so it is tested
// against one.
var rt client.Client

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if rt, err = client.New(cp.Config(), client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// namespace creates a namespace of its own for each run (-count) and
// returns its name.
func namespace(t *testing.T, name string) string {
	t.Helper()
	name = fmt.Sprintf("%s-%d", name, runs.Add(1))
	NewWithT(t).Expect(rt.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

var runs atomic.Int64

// deployment is a module's Deployment as KLM 1.20 applies it: its marks
// (managed-by kyma, component, part-of, owned-by, the disclaimer) in the
// object's metadata, applied with force under KLM's applier.
const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: manager
  namespace: %s
  labels:
    app: manager
    operator.kyma-project.io/managed-by: kyma
    app.kubernetes.io/component: k1-sample-123
    app.kubernetes.io/part-of: Kyma
  annotations:
    deprecated-operator.kyma-project.io/owned-by: kcp-system/k1-sample-123
    operator.kyma-project.io/managed-by-reconciler-disclaimer: "DO NOT EDIT"
spec:
  replicas: 1
  selector: {matchLabels: {app: manager}}
  template:
    metadata: {labels: {app: manager}}
    spec:
      containers:
      - name: manager
        image: example.org/manager:1.0.0
        env: [{name: MODE, value: klm}]
`

// ours is the same Deployment as this operator applies it: its own
// labels, none of KLM's marks, and without the env var.
const ours = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: manager
  namespace: %s
  labels:
    app: manager
    operator.kyma-project.io/managed-by: lifecycle-manager
spec:
  replicas: 1
  selector: {matchLabels: {app: manager}}
  template:
    metadata: {labels: {app: manager}}
    spec:
      containers:
      - name: manager
        image: example.org/manager:1.0.0
`

func applyAs(g Gomega, manager, manifest, ns string) {
	u := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal(fmt.Appendf(nil, manifest, ns), &u.Object)).To(Succeed())
	g.Expect(rt.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership)).To(Succeed())
}

var klm = sets.New(takeover.ApplierManager, takeover.DefaultCRManager)

// TestMovedFieldsArePrunedByTheNextApply takes over a Deployment that KLM
// applied: after the move only this operator's manager is left, nothing
// but metadata changed, and this operator's next apply removes what it no
// longer sets (KLM's marks, a dropped env var). Without the move they
// stay, which is the failure the move exists for.
func TestMovedFieldsArePrunedByTheNextApply(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, move := range []bool{true, false} {
		ns := namespace(t, fmt.Sprintf("moved-%t", move))
		applyAs(g, takeover.ApplierManager, deployment, ns)
		before := &appsv1.Deployment{}
		g.Expect(rt.Get(ctx, client.ObjectKey{Namespace: ns, Name: "manager"}, before)).To(Succeed())

		if move {
			m := takeover.Move{From: klm, To: "lifecycle-manager"}
			moved, err := m.Apply(ctx, rt, appsv1.SchemeGroupVersion.WithKind("Deployment"), client.ObjectKeyFromObject(before), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(moved).To(Equal(takeover.MovedNow))
			after := &appsv1.Deployment{}
			g.Expect(rt.Get(ctx, client.ObjectKeyFromObject(before), after)).To(Succeed())
			g.Expect(after.Generation).To(Equal(before.Generation), "only metadata changed")
			g.Expect(after.Spec).To(Equal(before.Spec))
			g.Expect(after.Labels).To(Equal(before.Labels))
			g.Expect(managers(after.ManagedFields)).To(Equal([]string{"lifecycle-manager/Apply"}))

			again, err := m.Apply(ctx, rt, appsv1.SchemeGroupVersion.WithKind("Deployment"), client.ObjectKeyFromObject(before), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(takeover.MovedAlready), "a second move writes nothing")
		}

		applyAs(g, "lifecycle-manager", ours, ns)
		applied := &appsv1.Deployment{}
		g.Expect(rt.Get(ctx, client.ObjectKeyFromObject(before), applied)).To(Succeed())
		if move {
			g.Expect(applied.Annotations).NotTo(HaveKey(takeover.DeprecatedOwnedByAnnotation))
			g.Expect(applied.Labels).To(Equal(map[string]string{"app": "manager", "operator.kyma-project.io/managed-by": "lifecycle-manager"}))
			g.Expect(applied.Spec.Template.Spec.Containers[0].Env).To(BeEmpty(), "the dropped env var is removed")
			g.Expect(managers(applied.ManagedFields)).To(Equal([]string{"lifecycle-manager/Apply"}))
		} else {
			g.Expect(applied.Annotations).To(HaveKey(takeover.DeprecatedOwnedByAnnotation), "KLM's manager still owns it")
			g.Expect(applied.Spec.Template.Spec.Containers[0].Env).NotTo(BeEmpty())
		}
	}
}

// TestMoveMergesUpdateEntriesAndLabels moves a default custom resource's
// kind of entry (KLM created it with Update) into this operator's, keeps a
// third party's entry, sets labels, and refuses to write over a version
// that changed meanwhile.
func TestMoveMergesUpdateEntriesAndLabels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "update-entries")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}, Data: map[string]string{"a": "1"}}
	g.Expect(rt.Create(ctx, cm, client.FieldOwner(takeover.DefaultCRManager))).To(Succeed())
	owner := cm.DeepCopy()
	owner.Data["b"] = "owner's"
	g.Expect(rt.Update(ctx, owner, client.FieldOwner("kubectl-edit"))).To(Succeed())
	stale := owner.DeepCopy()
	g.Expect(managers(owner.ManagedFields)).To(ConsistOf(takeover.DefaultCRManager+"/Update", "kubectl-edit/Update"))

	m := takeover.Move{From: klm, To: "lifecycle-manager", Labels: map[string]string{"operator.kyma-project.io/module-name": "sample"}}
	moved, err := m.Apply(ctx, rt, corev1.SchemeGroupVersion.WithKind("ConfigMap"), client.ObjectKeyFromObject(cm), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(Equal(takeover.MovedNow))
	after := &corev1.ConfigMap{}
	g.Expect(rt.Get(ctx, client.ObjectKeyFromObject(cm), after)).To(Succeed())
	g.Expect(after.Labels).To(HaveKeyWithValue("operator.kyma-project.io/module-name", "sample"))
	g.Expect(after.Data).To(Equal(map[string]string{"a": "1", "b": "owner's"}))
	g.Expect(managers(after.ManagedFields)).NotTo(ContainElement(HavePrefix(takeover.DefaultCRManager)))
	g.Expect(managers(after.ManagedFields)).To(ContainElements("lifecycle-manager/Apply", "kubectl-edit/Update"))

	// The move read the version of its own Get; one written over a
	// version that changed since is refused.
	fields, _, err := takeover.MoveFields(stale.ManagedFields, klm, "lifecycle-manager", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	stale.ManagedFields = fields
	err = rt.Update(ctx, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)

	gone, err := m.Apply(ctx, rt, corev1.SchemeGroupVersion.WithKind("ConfigMap"), client.ObjectKey{Namespace: ns, Name: "absent"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(Equal(takeover.MovedGone))
}

func managers(entries []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	return out
}

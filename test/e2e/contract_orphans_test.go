package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// orphansAfter is the e2e operator's --orphaned-finalizers-after (with
// --orphaned-finalizers=remove).
const orphansAfter = time.Minute

// foreignFinalizer is another controller's finalizer: never the module's.
const foreignFinalizer = "backup.example.com/keep"

// holdOwn puts, on the module's shipped custom resource, a finalizer of the
// module's own domain that its operator does not know (so that only the
// policy removes it once the operator is gone), and the given others.
func holdOwn(t *testing.T, k *testKyma, m templateOperator, others ...string) (hold string, key client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	hold = m.group + "/hold"
	shipped := sampleRef(m, m.namespace, "shipped").(*unstructured.Unstructured)
	key = client.ObjectKeyFromObject(shipped)
	g.Eventually(func(g Gomega) {
		g.Expect(k.runtime.client.Get(context.Background(), key, shipped)).To(Succeed())
		for _, f := range append([]string{hold}, others...) {
			controllerutil.AddFinalizer(shipped, f)
		}
		g.Expect(k.runtime.client.Update(context.Background(), shipped)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	return hold, key
}

// readyCondition is the Manifest's Ready condition, read through g.
func (k *testKyma) readyCondition(g Gomega, module string) metav1.Condition {
	return condition(k.manifest(g, module), v1beta2.ConditionReady)
}

// readyTrail records each distinct Ready reason and message a test reads,
// with when it first read it, and prints them if the test fails: a failed
// wait then shows the way the status went, not only where it ended.
type readyTrail struct {
	start time.Time
	seen  []string
}

func newReadyTrail(t *testing.T) *readyTrail {
	t.Helper()
	trail := &readyTrail{start: time.Now()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the Manifest's Ready condition as the test read it:\n%s", strings.Join(trail.seen, "\n"))
		}
	})
	return trail
}

// read is the Manifest's Ready condition, recorded if it is new.
func (r *readyTrail) read(g Gomega, k *testKyma, module string) metav1.Condition {
	c := k.readyCondition(g, module)
	entry := c.Reason + ": " + c.Message
	if n := len(r.seen); n == 0 || !strings.HasSuffix(r.seen[n-1], "] "+entry) {
		r.seen = append(r.seen, fmt.Sprintf("[%6.1fs] %s", time.Since(r.start).Seconds(), entry))
	}
	return c
}

// TestContractOperatorGoneFinalizersRemoved removes a module whose shipped
// custom resource holds a finalizer of the module's own domain that its
// operator does not remove, and another controller's finalizer; then the
// module's manager is deleted, as if it had been removed first. The
// removal waits for the operator while it runs, says OperatorGone, naming
// the resource, its finalizers and the manager, once it is gone; after
// --orphaned-finalizers-after the module's own finalizer goes (an event
// and a note in the history of the Manifest and of the Kyma) and the other
// controller's stays, still named, until its owner removes it.
func TestContractOperatorGoneFinalizersRemoved(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installTemplateOperator(t, "tpl-orphans")
	rc := k.runtime.client
	hold, shipped := holdOwn(t, k, m, foreignFinalizer)
	named := "TemplateSample " + shipped.String()
	trail := newReadyTrail(t)

	k.withModules(t)
	g.Eventually(func(g Gomega) {
		ready := trail.read(g, k, m.name)
		g.Expect(ready.Reason).To(Equal(manifest.ReasonDeletingCustomResources))
		g.Expect(ready.Message).To(Equal("Waiting for the module's operator to finalize 1 of the module's custom resources: " + named))
	}, timeout, interval).Should(Succeed())

	g.Expect(rc.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: "manager"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		ready := trail.read(g, k, m.name)
		g.Expect(ready.Reason).To(Equal(manifest.ReasonOperatorGone))
		g.Expect(ready.Message).To(And(
			HavePrefix("The module's operator is gone (its manager Deployment "+m.namespace+"/manager does not exist), "+
				"and 1 of the module's custom resources wait for finalizers that nothing removes: "+named+" (finalizers "+hold+", "+foreignFinalizer+"; waiting "),
			HaveSuffix("The module's own finalizers are removed 1m0s after a resource's deletion unless the manager is back first (--orphaned-finalizers=remove); "+
				"finalizers that are not the module's stay until their owners remove them"),
		))
		g.Expect(k.manifest(g, m.name).Status.State).To(Equal(v1beta2.StateDeleting), "a known state, not an error")
	}, timeout, interval).Should(Succeed())
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(m.kind())
	g.Expect(rc.Get(ctx, shipped, obj)).To(Succeed())
	g.Expect(obj.GetFinalizers()).To(ContainElement(hold), "nothing is removed before the time the SRE set")

	// After the time: the module's own finalizer goes, the other stays.
	g.Eventually(func(g Gomega) {
		g.Expect(rc.Get(ctx, shipped, obj)).To(Succeed())
		g.Expect(obj.GetFinalizers()).To(Equal([]string{foreignFinalizer}))
	}, orphansAfter+timeout, interval).Should(Succeed())
	note := "Removed finalizer " + hold + " from " + named + " after it waited "
	g.Eventually(func(g Gomega) {
		ready := trail.read(g, k, m.name)
		mf := k.manifest(g, m.name)
		g.Expect(ready.Reason).To(Equal(manifest.ReasonOperatorGone))
		g.Expect(ready.Message).To(ContainSubstring(named + " (finalizers " + foreignFinalizer + "; waiting "))
		g.Expect(mf.Status.Operations).NotTo(BeEmpty())
		g.Expect(mf.Status.Operations[0].Type).To(Equal(v1beta2.OperationRemoval))
		g.Expect(mf.Status.Operations[0].Notes).To(ConsistOf(And(HavePrefix(note), HaveSuffix(
			": its manager Deployment "+m.namespace+"/manager does not exist (--orphaned-finalizers=remove)"))))
		g.Expect(warningEvents(g, "Manifest", mf.Name, mf.UID, manifest.ReasonFinalizersRemoved)).To(ConsistOf(
			HaveField("Note", HavePrefix(note))))
		// The Kyma keeps the removal, with its note, after the Manifest goes.
		g.Expect(k.moduleStatus(g, m.name).Removal).NotTo(BeNil())
		g.Expect(k.moduleStatus(g, m.name).Removal.Notes).To(ConsistOf(HavePrefix(note)))
	}, timeout, interval).Should(Succeed())

	// The other controller's finalizer is its owner's to remove.
	g.Expect(rc.Get(ctx, shipped, obj)).To(Succeed())
	controllerutil.RemoveFinalizer(obj, foreignFinalizer)
	g.Expect(rc.Update(ctx, obj)).To(Succeed())
	k.eventuallyManifestGone(t, m.name)
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		i := slices.IndexFunc(kyma.Status.Operations, func(op v1beta2.Operation) bool { return op.Module == m.name })
		g.Expect(i).To(BeNumerically(">=", 0), "the removal is in the Kyma's history")
		g.Expect(kyma.Status.Operations[i].Notes).To(ConsistOf(HavePrefix(note)))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() []string { return m.leftovers(ctx, rc) }, timeout, interval).Should(BeEmpty())
}

// TestContractOperatorBackBeforeTheDeadline deletes the module's manager
// while the removal waits for the module's operator, and brings it back
// before --orphaned-finalizers-after: the status goes from OperatorGone
// back to waiting for the operator, which finalizes the resource; the
// operator removed no finalizer.
func TestContractOperatorBackBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installTemplateOperator(t, "tpl-orphans-back")
	rc := k.runtime.client
	hold, shipped := holdOwn(t, k, m)

	k.withModules(t)
	g.Eventually(func(g Gomega) {
		g.Expect(k.readyCondition(g, m.name).Reason).To(Equal(manifest.ReasonDeletingCustomResources))
	}, timeout, interval).Should(Succeed())
	manager := &appsv1.Deployment{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: "manager"}, manager)).To(Succeed())
	g.Expect(rc.Delete(ctx, manager)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.readyCondition(g, m.name).Reason).To(Equal(manifest.ReasonOperatorGone))
	}, timeout, interval).Should(Succeed())

	// Back, as its owner would deploy it again: available once the runtime's
	// controllers and kwok have run its Pod.
	back := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: "manager"},
		Spec:       *manager.Spec.DeepCopy(),
	}
	g.Expect(rc.Create(ctx, back)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ready := k.readyCondition(g, m.name)
		g.Expect(ready.Reason).To(Equal(manifest.ReasonDeletingCustomResources))
		g.Expect(ready.Message).To(Equal("Waiting for the module's operator to finalize 1 of the module's custom resources: TemplateSample " + shipped.String()))
	}, timeout, interval).Should(Succeed())

	// The module's operator does its work.
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(m.kind())
	g.Expect(rc.Get(ctx, shipped, obj)).To(Succeed())
	g.Expect(obj.GetFinalizers()).To(ContainElement(hold), "the manager came back before the deadline: nothing was removed")
	controllerutil.RemoveFinalizer(obj, hold)
	g.Expect(rc.Update(ctx, obj)).To(Succeed())
	mf := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, m.name)}, mf)).To(Succeed())
	k.eventuallyManifestGone(t, m.name)
	g.Expect(warningEvents(g, "Manifest", mf.Name, mf.UID, manifest.ReasonFinalizersRemoved)).To(BeEmpty())
	// The Deployment the test made is not the module's: it stays.
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(back), back)).To(Succeed())
	g.Expect(rc.Delete(ctx, back)).To(Succeed())
}

// warningEvents are the Warning events about an object with the reason,
// told by its UID too (testenv.Events).
func warningEvents(g Gomega, kind, name string, uid types.UID, reason string) []eventsv1.Event {
	regarding := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: kcpNamespace, Name: name, UID: uid}}
	events, err := testenv.Events(context.Background(), env.kcpClient, kind, regarding, "")
	g.Expect(err).NotTo(HaveOccurred())
	var out []eventsv1.Event
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

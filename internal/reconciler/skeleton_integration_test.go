package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// kcp is a client of a real control plane with the project's CRDs, for the
// tests of what the skeleton writes: optimistic locks are the API server's
// to enforce, so they are tested against one.
var kcp client.Client

const testNamespace = "skeleton"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := v1beta2.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kcp, err = client.New(cp.Config(), client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := kcp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func newManifest(t *testing.T, name string) {
	t.Helper()
	m := &v1beta2.Manifest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       v1beta2.ManifestSpec{ModuleName: "sample", Version: "1.0.0", Remote: true},
	}
	NewWithT(t).Expect(kcp.Create(context.Background(), m)).To(Succeed())
	// Gone after the test, finalizers and all, so that a rerun (-count)
	// creates it afresh.
	t.Cleanup(func() {
		ctx := context.Background()
		NewWithT(t).Eventually(func(g Gomega) {
			left := &v1beta2.Manifest{}
			err := kcp.Get(ctx, client.ObjectKeyFromObject(m), left)
			if apierrors.IsNotFound(err) {
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			left.Finalizers = nil
			g.Expect(kcp.Update(ctx, left)).To(Succeed())
			g.Expect(client.IgnoreNotFound(kcp.Delete(ctx, left))).To(Succeed())
			g.Expect(apierrors.IsNotFound(kcp.Get(ctx, client.ObjectKeyFromObject(m), left))).To(BeTrue())
		}, time.Minute, 50*time.Millisecond).Should(Succeed())
	})
}

func get(g Gomega, name string) *v1beta2.Manifest {
	m := &v1beta2.Manifest{}
	g.Expect(kcp.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, m)).To(Succeed())
	return m
}

// phases record outcomes on a Manifest like the Manifest controller does;
// reconcile and remove are the test's.
func phases(finalizer string, reconcile, remove func(context.Context, *v1beta2.Manifest) reconciler.Outcome) reconciler.Phases[*v1beta2.Manifest] {
	return reconciler.Phases[*v1beta2.Manifest]{
		Controller: "test",
		Finalizer:  finalizer,
		Reconcile:  reconcile,
		Delete:     remove,
		Record: func(m *v1beta2.Manifest, o reconciler.Outcome) {
			reconciler.Record(reconciler.Status{Conditions: &m.Status.Conditions, State: &m.Status.State, ObservedGeneration: &m.Status.ObservedGeneration}, m.Generation, o)
		},
		Status: func(m *v1beta2.Manifest) any { return &m.Status },
	}
}

// TestStatusWrittenMeanwhileIsNotOverwritten has another writer change the
// Manifest's status while a reconcile runs on what it read before: the
// reconcile's status patch is refused (409), Run asks for a quick quiet
// requeue, and the other writer's status stays.
func TestStatusWrittenMeanwhileIsNotOverwritten(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newManifest(t, "status-race")
	read := get(g, "status-race")

	ready := func(ctx context.Context, m *v1beta2.Manifest) reconciler.Outcome {
		other := get(g, m.Name)
		other.Status.State = v1beta2.StateWarning
		other.Status.LastOperation = v1beta2.LastOperation{Operation: "written by another writer", LastUpdateTime: metav1.Now()}
		g.Expect(kcp.Status().Update(ctx, other)).To(Succeed())
		return reconciler.Ready("Ready", "Module is installed and ready", time.Minute)
	}
	result, err := reconciler.Run(ctx, kcp, read, phases("", ready, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(ctrl.Result{RequeueAfter: 200 * time.Millisecond}), "a conflict is a quick, quiet requeue")

	after := get(g, "status-race")
	g.Expect(after.Status.LastOperation.Operation).To(Equal("written by another writer"))
	g.Expect(after.Status.State).To(Equal(v1beta2.StateWarning))
	g.Expect(after.Status.Conditions).To(BeEmpty(), "the stale reconcile wrote nothing")

	// Reconciling again on what is there now records the outcome.
	result, err = reconciler.Run(ctx, kcp, after, phases("", func(context.Context, *v1beta2.Manifest) reconciler.Outcome {
		return reconciler.Ready("Ready", "Module is installed and ready", time.Minute)
	}, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.RequeueAfter).To(Equal(time.Minute))
	g.Expect(get(g, "status-race").Status.State).To(Equal(v1beta2.StateReady))
}

// TestFinalizerOfAnotherControllerSurvives has another controller add its
// finalizer to a Manifest between our read and our finalizer patches, when
// ours is added and when it is removed: its finalizer is never dropped (a
// plain merge patch of the list would replace it with ours).
func TestFinalizerOfAnotherControllerSurvives(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ours, theirs = "operator.kyma-project.io/test", "other.example/keep"
	newManifest(t, "finalizers")
	stale := get(g, "finalizers")
	addTheirs := get(g, "finalizers")
	controllerutil.AddFinalizer(addTheirs, theirs)
	g.Expect(kcp.Update(ctx, addTheirs)).To(Succeed())

	ready := func(context.Context, *v1beta2.Manifest) reconciler.Outcome {
		return reconciler.Ready("Ready", "Ready", time.Minute)
	}
	done := func(context.Context, *v1beta2.Manifest) reconciler.Outcome { return reconciler.Done() }
	// The stale add is refused; ours is added again onto the object as it
	// is now, in the same reconcile, which then goes on (no requeue a
	// second later: a new Kyma's first status would wait for it).
	result, err := reconciler.Run(ctx, kcp, stale, phases(ours, ready, done))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.RequeueAfter).To(Equal(time.Minute), "the reconcile ran after the finalizer was added again")
	g.Expect(get(g, "finalizers").Finalizers).To(ConsistOf(theirs, ours))

	// Deleting: ours goes, theirs stays, also when the object changed
	// between our read and our patch.
	g.Expect(kcp.Delete(ctx, get(g, "finalizers"))).To(Succeed())
	stale = get(g, "finalizers")
	changed := get(g, "finalizers")
	changed.Labels = map[string]string{"touched": "meanwhile"}
	g.Expect(kcp.Update(ctx, changed)).To(Succeed())
	result, err = reconciler.Run(ctx, kcp, stale, phases(ours, ready, done))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.RequeueAfter).To(Equal(200 * time.Millisecond))
	g.Expect(get(g, "finalizers").Finalizers).To(ConsistOf(theirs, ours))

	_, err = reconciler.Run(ctx, kcp, get(g, "finalizers"), phases(ours, ready, done))
	g.Expect(err).NotTo(HaveOccurred())
	left := get(g, "finalizers")
	g.Expect(left.Finalizers).To(ConsistOf(theirs), "only our finalizer is removed")

	controllerutil.RemoveFinalizer(left, theirs)
	g.Expect(kcp.Update(ctx, left)).To(Succeed())
}

// TestStatusSurvivesAMetadataChangeMeanwhile changes only the Manifest's
// metadata (as a deletion beginning does) between read and patch: the
// status this reconcile computed, its inventory above all, is still written
// (on the fresh object), since losing it would leave objects in the runtime
// that no later reconcile knows of.
func TestStatusSurvivesAMetadataChangeMeanwhile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newManifest(t, "metadata-race")
	read := get(g, "metadata-race")

	applied := func(ctx context.Context, m *v1beta2.Manifest) reconciler.Outcome {
		other := get(g, m.Name)
		other.Labels = map[string]string{"changed": "meanwhile"}
		g.Expect(kcp.Update(ctx, other)).To(Succeed())
		m.Status.Synced = []v1beta2.Resource{{Name: "applied", Namespace: "default", GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
		return reconciler.Ready("Ready", "Module is installed and ready", time.Minute)
	}
	_, err := reconciler.Run(ctx, kcp, read, phases("", applied, nil))
	g.Expect(err).NotTo(HaveOccurred())

	after := get(g, "metadata-race")
	g.Expect(after.Labels).To(HaveKeyWithValue("changed", "meanwhile"), "the other writer's change stays")
	g.Expect(after.Status.Synced).To(HaveLen(1), "the inventory of what was applied is recorded")
	g.Expect(after.Status.State).To(Equal(v1beta2.StateReady))
}

// TestReleasedObjectIsNotDeletedAgain hands Run, after it released a
// Manifest, the Manifest as a lagging cache still shows it: being deleted,
// with the finalizer. Delete is not run again on that past state (it would
// write to the runtime what the finished removal took away).
func TestReleasedObjectIsNotDeletedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ours, theirs = "operator.kyma-project.io/test", "other.example/keep"
	newManifest(t, "released")
	m := get(g, "released")
	controllerutil.AddFinalizer(m, ours)
	controllerutil.AddFinalizer(m, theirs)
	g.Expect(kcp.Update(ctx, m)).To(Succeed())
	g.Expect(kcp.Delete(ctx, m)).To(Succeed())
	stale := get(g, "released")

	deletes := 0
	remove := func(context.Context, *v1beta2.Manifest) reconciler.Outcome {
		deletes++
		return reconciler.Done()
	}
	_, err := reconciler.Run(ctx, kcp, stale.DeepCopy(), phases(ours, nil, remove))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deletes).To(Equal(1))
	left := get(g, "released")
	g.Expect(left.Finalizers).To(ConsistOf(theirs), "the removal finished")

	result, err := reconciler.Run(ctx, kcp, stale.DeepCopy(), phases(ours, nil, remove))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(ctrl.Result{}))
	g.Expect(deletes).To(Equal(1), "the stale copy still lists our finalizer, but its object was released")

	// Another controller's finalizer on the same object is its own: its
	// Delete still runs, and the object goes.
	_, err = reconciler.Run(ctx, kcp, left, phases(theirs, nil, remove))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deletes).To(Equal(2), "the other controller's Delete ran")
	g.Expect(apierrors.IsNotFound(kcp.Get(ctx, client.ObjectKeyFromObject(left), &v1beta2.Manifest{}))).To(BeTrue())
}

// TestACopyOlderThanItsOwnStatusWriteWaits hands Run, right after it wrote
// a Manifest's status, the Manifest as a lagging cache still shows it:
// from before that write. The reconcile does not run on it (it would redo
// what the written status already records, and lose its own write to a
// conflict); it comes back in a moment. A copy at or after the write runs.
func TestACopyOlderThanItsOwnStatusWriteWaits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newManifest(t, "stale-copy")
	before := get(g, "stale-copy")
	runs := 0
	ready := func(_ context.Context, m *v1beta2.Manifest) reconciler.Outcome {
		runs++
		return reconciler.Ready("Ready", "Module is installed and ready", time.Minute)
	}
	_, err := reconciler.Run(ctx, kcp, before.DeepCopy(), phases("", ready, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runs).To(Equal(1))
	g.Expect(get(g, "stale-copy").ResourceVersion).NotTo(Equal(before.ResourceVersion), "the status was written")

	result, err := reconciler.Run(ctx, kcp, before.DeepCopy(), phases("", ready, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(ctrl.Result{RequeueAfter: 50 * time.Millisecond}), "a stale copy comes back in a moment")
	g.Expect(runs).To(Equal(1), "the reconcile ran on a copy older than its own status write")

	_, err = reconciler.Run(ctx, kcp, get(g, "stale-copy"), phases("", ready, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runs).To(Equal(2), "a current copy runs")
}

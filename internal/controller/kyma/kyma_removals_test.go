package kyma

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// The tests here drive the Kyma reconcile by hand, one reconcile at a time,
// against a real control plane and a real runtime, with no Manifest
// controller: the test plays it (a Manifest's status, its finalizer). So
// every order of events a busy operator can produce is forced, not hoped
// for: a Manifest that is gone before any status write showed it Deleting,
// a status write that is lost, an operator that restarts mid-removal.

// removalsNamespace is where the Kymas, their kubeconfig Secrets and the
// catalog of these tests live.
const removalsNamespace = "kcp-removals"

var removalsEnv struct {
	once    sync.Once
	err     error
	kcp     *testcluster.ControlPlane
	runtime *testcluster.ControlPlane
	client  client.Client // past any cache
	scheme  *k8sruntime.Scheme
}

// TestMain stops the control planes the removal tests started, if any: the
// unit tests of the package start none. It serves the Helm render
// processes of the content pipeline that kyma_images_test.go starts.
func TestMain(m *testing.M) {
	render.ServeIfRenderProcess()
	code := m.Run()
	if removalsEnv.kcp != nil {
		_ = removalsEnv.kcp.Stop()
	}
	if removalsEnv.runtime != nil {
		_ = removalsEnv.runtime.Stop()
	}
	os.Exit(code)
}

// startRemovalsEnv starts, once per test binary, the control plane and the
// runtime (another control plane: the Kyma reconcile needs nothing of a
// runtime but its API server).
func startRemovalsEnv(t *testing.T) {
	t.Helper()
	removalsEnv.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		e := &removalsEnv
		if e.scheme, e.err = removalsScheme(); e.err != nil {
			return
		}
		if e.kcp, e.err = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{}); e.err != nil {
			return
		}
		if e.runtime, e.err = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{}}); e.err != nil {
			return
		}
		if e.client, e.err = client.New(e.kcp.Config(), client.Options{Scheme: e.scheme}); e.err != nil {
			return
		}
		e.err = e.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: removalsNamespace}})
	})
	if removalsEnv.err != nil {
		t.Fatalf("starting the control planes: %v", removalsEnv.err)
	}
}

func removalsScheme() (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// operatorUnderTest is a Kyma reconciler with its own manager cache, as one
// process of the operator has: a restart is a new one.
type operatorUnderTest struct {
	r      *Reconciler
	cache  client.Client
	stop   context.CancelFunc
	done   chan struct{}
	failed atomic.Bool // status writes fail while set
}

func startOperatorUnderTest(t *testing.T) *operatorUnderTest {
	t.Helper()
	startRemovalsEnv(t)
	e := &removalsEnv
	mgr, err := ctrl.NewManager(e.kcp.Config(), ctrl.Options{
		Scheme:                 e.scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("creating a manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &operatorUnderTest{stop: cancel, done: make(chan struct{}), cache: mgr.GetClient()}
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	// The status writes go through a switch that can lose them, as a
	// timeout or a conflict would.
	writes := lossyStatus{Client: mgr.GetClient(), lose: &o.failed}
	o.r = &Reconciler{
		Client: writes,
		Runtimes: remote.NewCache(mgr.GetClient(), mgr.GetAPIReader(), remote.Options{
			Scheme: e.scheme, Namespace: removalsNamespace, QPS: 100, Burst: 200, Indexed: true,
		}),
		Recorder:      mgr.GetEventRecorder("removals-test"),
		Intervals:     requeue.Intervals{Ready: time.Minute, Processing: time.Second, Error: time.Second, Warning: time.Second},
		SyncNamespace: "kyma-system",
	}
	if err := o.r.prepare(ctx, mgr, removalsNamespace); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(o.done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	t.Cleanup(o.shutdown)
	return o
}

// lossyStatus is a client whose status writes fail while lose is set.
type lossyStatus struct {
	client.Client
	lose *atomic.Bool
}

func (c lossyStatus) Status() client.SubResourceWriter {
	return lossyWriter{SubResourceWriter: c.Client.Status(), lose: c.lose}
}

type lossyWriter struct {
	client.SubResourceWriter
	lose *atomic.Bool
}

func (w lossyWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if w.lose.Load() {
		return apierrors.NewServerTimeout(schema.GroupResource{Group: v1beta2.GroupVersion.Group, Resource: "kymas"}, "patch", 1)
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (o *operatorUnderTest) shutdown() {
	o.stop()
	<-o.done
}

// removalKyma is one test's Kyma, its runtime registration and its modules.
type removalKyma struct {
	t    *testing.T
	name string
	op   *operatorUnderTest
}

// newRemovalKyma registers a runtime under a new Kyma, publishes the given
// modules (content-less templates: nothing is fetched) and lists them.
func newRemovalKyma(t *testing.T, op *operatorUnderTest, modules ...string) *removalKyma {
	t.Helper()
	startRemovalsEnv(t)
	ctx := context.Background()
	c := removalsEnv.client
	name := kymaNameFor(t)
	k := &removalKyma{t: t, name: name, op: op}
	objs := []client.Object{&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: removalsNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{remote.KubeconfigKey: removalsEnv.runtime.Kubeconfig()},
	}}
	listed := make([]v1beta2.Module, 0, len(modules))
	for _, m := range modules {
		objs = append(objs,
			&v1beta2.ModuleTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: m + "-1.0.0", Namespace: removalsNamespace},
				Spec:       v1beta2.ModuleTemplateSpec{ModuleName: m, Version: "1.0.0"},
			},
			&v1beta2.ModuleReleaseMeta{
				ObjectMeta: metav1.ObjectMeta{Name: m, Namespace: removalsNamespace},
				Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: m, Channels: []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "1.0.0"}}},
			})
		listed = append(listed, v1beta2.Module{Name: m, Managed: true})
	}
	objs = append(objs, &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: removalsNamespace},
		// A sync namespace of its own: the runtime is shared, its Kyma is
		// not.
		Spec: v1beta2.KymaSpec{Channel: "regular", Modules: listed, SyncNamespace: "sync-" + name},
	})
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	return k
}

var (
	testIDsMu sync.Mutex
	// One per test run, not per test name: go test -count runs a test
	// again in the same process, against the same control plane.
	testIDs = map[*testing.T]string{}
)

// testID is a short id of the test, in letters: module names are words.
func testID(t *testing.T) string {
	testIDsMu.Lock()
	defer testIDsMu.Unlock()
	if id, ok := testIDs[t]; ok {
		return id
	}
	n := len(testIDs)
	id := "tst" + string(rune('a'+n/26%26)) + string(rune('a'+n%26))
	testIDs[t] = id
	return id
}

func kymaNameFor(t *testing.T) string { return "removals-" + testID(t) }

// module names a module of this test.
func module(t *testing.T, short string) string {
	return testID(t) + "-" + short
}

// reconcile runs one reconcile of the Kyma once the operator's cache has
// everything written so far, as a reconcile that follows a watch event
// would see it.
func (k *removalKyma) reconcile() {
	k.t.Helper()
	k.waitForCache()
	if _, err := k.op.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: removalsNamespace, Name: k.name}}); err != nil {
		// An error is a retry: what matters is what was stored.
		k.t.Logf("reconcile returned %v", err)
	}
}

// waitForCache waits until the operator's cache holds the Kyma and its
// Manifests as the API server has them.
func (k *removalKyma) waitForCache() {
	k.t.Helper()
	ctx := context.Background()
	NewWithT(k.t).Eventually(func(g Gomega) {
		want, got := &v1beta2.Kyma{}, &v1beta2.Kyma{}
		key := client.ObjectKey{Namespace: removalsNamespace, Name: k.name}
		wantErr, gotErr := removalsEnv.client.Get(ctx, key, want), k.op.cache.Get(ctx, key, got)
		g.Expect(apierrors.IsNotFound(gotErr)).To(Equal(apierrors.IsNotFound(wantErr)))
		g.Expect(got.ResourceVersion).To(Equal(want.ResourceVersion))
		g.Expect(versions(g, k.op.cache, index.OfKyma(k.name))).To(Equal(versions(g, removalsEnv.client, client.MatchingLabels{v1beta2.KymaNameLabel: k.name})))
	}).WithTimeout(30 * time.Second).WithPolling(10 * time.Millisecond).Should(Succeed())
}

func versions(g Gomega, c client.Reader, selector client.ListOption) map[string]string {
	list := &v1beta2.ManifestList{}
	g.Expect(c.List(context.Background(), list, client.InNamespace(removalsNamespace), selector)).To(Succeed())
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = m.ResourceVersion
	}
	return out
}

func (k *removalKyma) get() *v1beta2.Kyma {
	k.t.Helper()
	kyma := &v1beta2.Kyma{}
	if err := removalsEnv.client.Get(context.Background(), client.ObjectKey{Namespace: removalsNamespace, Name: k.name}, kyma); err != nil {
		k.t.Fatalf("reading the Kyma: %v", err)
	}
	return kyma
}

func (k *removalKyma) manifest(module string) (*v1beta2.Manifest, bool) {
	k.t.Helper()
	m := &v1beta2.Manifest{}
	err := removalsEnv.client.Get(context.Background(), client.ObjectKey{Namespace: removalsNamespace, Name: ManifestName(k.name, module)}, m)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		k.t.Fatalf("reading Manifest of %s: %v", module, err)
	}
	return m, true
}

// setModules replaces the Kyma's module list.
func (k *removalKyma) setModules(modules ...string) {
	k.t.Helper()
	kyma := k.get()
	kyma.Spec.Modules = nil
	for _, m := range modules {
		kyma.Spec.Modules = append(kyma.Spec.Modules, v1beta2.Module{Name: m, Managed: true})
	}
	if err := removalsEnv.client.Update(context.Background(), kyma); err != nil {
		k.t.Fatalf("updating the Kyma: %v", err)
	}
}

// installed plays the Manifest controller: the module's Manifest reports
// its install Ready.
func (k *removalKyma) installed(module string) {
	k.t.Helper()
	m, ok := k.manifest(module)
	if !ok {
		k.t.Fatalf("module %s has no Manifest", module)
	}
	now := metav1.Now()
	m.Status.State = v1beta2.StateReady
	m.Status.ObservedGeneration = m.Generation
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1beta2.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "installed", ObservedGeneration: m.Generation})
	m.Status.Operations = []v1beta2.Operation{{Type: v1beta2.OperationInstall, ToVersion: "1.0.0", Result: v1beta2.OperationReady, StartedAt: now, FinishedAt: &now}}
	if err := removalsEnv.client.Status().Update(context.Background(), m); err != nil {
		k.t.Fatalf("reporting %s installed: %v", module, err)
	}
}

// removed plays the Manifest controller once the module is uninstalled: it
// lets the Manifest go, which the API server then deletes at once.
func (k *removalKyma) removed(module string) {
	k.t.Helper()
	m, ok := k.manifest(module)
	if !ok || m.DeletionTimestamp.IsZero() {
		k.t.Fatalf("module %s has no Manifest being deleted", module)
	}
	controllerutil.RemoveFinalizer(m, v1beta2.ManifestFinalizer)
	if err := removalsEnv.client.Update(context.Background(), m); err != nil {
		k.t.Fatalf("releasing Manifest of %s: %v", module, err)
	}
	if _, ok := k.manifest(module); ok {
		k.t.Fatalf("Manifest of %s still there without finalizers", module)
	}
}

// install brings the Kyma's modules to Ready.
func (k *removalKyma) install(modules ...string) {
	k.t.Helper()
	// The first reconcile may stop after adding the Kyma's finalizer.
	for range 2 {
		k.reconcile()
	}
	for _, m := range modules {
		k.installed(m)
	}
	k.reconcile()
	g := NewWithT(k.t)
	g.Expect(k.get().Status.Modules).To(HaveEach(HaveField("State", v1beta2.StateReady)), "modules installed")
}

// removals are the Kyma's recorded removals of module.
func removals(kyma *v1beta2.Kyma, module string) []v1beta2.Operation {
	var out []v1beta2.Operation
	for _, op := range kyma.Status.Operations {
		if op.Module == module {
			out = append(out, op)
		}
	}
	return out
}

func entry(kyma *v1beta2.Kyma, module string) *v1beta2.ModuleStatus {
	for i := range kyma.Status.Modules {
		if kyma.Status.Modules[i].Name == module {
			return &kyma.Status.Modules[i]
		}
	}
	return nil
}

// The order that lost removals: the Manifest was deleted, its status write
// was lost (a conflict under load), and the Manifest was gone before the
// next reconcile. Now the Manifest is deleted only once the removal is
// stored, so a lost write only delays the deletion.
func TestRemovalSurvivesALostStatusWrite(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	op := startOperatorUnderTest(t)
	shop := module(t, "shop")
	k := newRemovalKyma(t, op, shop)
	k.install(shop)

	k.setModules()
	op.failed.Store(true)
	k.reconcile()
	m, ok := k.manifest(shop)
	g.Expect(ok).To(BeTrue())
	g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "no Manifest is deleted before its removal is stored")
	op.failed.Store(false)

	k.reconcile() // stores the removal
	stored := entry(k.get(), shop)
	g.Expect(stored).NotTo(BeNil())
	g.Expect(stored.State).To(Equal(v1beta2.StateDeleting))
	g.Expect(stored.Removal).To(HaveField("Result", v1beta2.OperationInProgress))
	g.Expect(stored.Removal).To(HaveField("FromVersion", "1.0.0"))
	m, _ = k.manifest(shop)
	g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "deleted by the next reconcile, which reads the stored removal")

	op.failed.Store(true) // the deleting reconcile's status write is lost too
	k.reconcile()
	op.failed.Store(false)
	m, _ = k.manifest(shop)
	g.Expect(m.DeletionTimestamp.IsZero()).To(BeFalse(), "deleted")
	k.removed(shop) // gone before any status write showed it being deleted

	k.reconcile()
	kyma := k.get()
	g.Expect(kyma.Status.Modules).To(BeEmpty())
	g.Expect(removals(kyma, shop)).To(ConsistOf(And(
		HaveField("Type", v1beta2.OperationRemoval), HaveField("Result", v1beta2.OperationReady),
		HaveField("FromVersion", "1.0.0"), HaveField("FinishedAt", Not(BeNil())))))

	k.reconcile()
	k.reconcile()
	g.Expect(removals(k.get(), shop)).To(HaveLen(1), "recorded once")
}

// The Manifest goes between two reconciles: the one that deletes it and
// the next, with no reconcile seeing it being deleted.
func TestRemovalWhenTheManifestGoesBetweenReconciles(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	op := startOperatorUnderTest(t)
	shop := module(t, "shop")
	k := newRemovalKyma(t, op, shop)
	k.install(shop)

	k.setModules()
	k.reconcile() // stores the removal
	k.reconcile() // deletes the Manifest
	k.removed(shop)
	k.reconcile()
	kyma := k.get()
	g.Expect(kyma.Status.Modules).To(BeEmpty())
	g.Expect(removals(kyma, shop)).To(ConsistOf(HaveField("Result", v1beta2.OperationReady)))
	k.reconcile()
	g.Expect(removals(k.get(), shop)).To(HaveLen(1))
}

// The operator restarts after deleting the Manifest: the new process knows
// the removal from the stored status alone.
func TestRemovalAcrossAnOperatorRestart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	first := startOperatorUnderTest(t)
	shop := module(t, "shop")
	k := newRemovalKyma(t, first, shop)
	k.install(shop)
	k.setModules()
	k.reconcile()
	k.reconcile()
	m, _ := k.manifest(shop)
	g.Expect(m.DeletionTimestamp.IsZero()).To(BeFalse())
	first.shutdown()

	k.removed(shop) // while no operator runs
	k.op = startOperatorUnderTest(t)
	k.reconcile()
	k.reconcile()
	kyma := k.get()
	g.Expect(kyma.Status.Modules).To(BeEmpty())
	g.Expect(removals(kyma, shop)).To(ConsistOf(And(HaveField("Result", v1beta2.OperationReady), HaveField("FromVersion", "1.0.0"))))
}

// Two modules removed at once finish one after the other, each recorded
// once; the module kept has no removal.
func TestTwoRemovalsAtOnce(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	op := startOperatorUnderTest(t)
	a, b, kept := module(t, "one"), module(t, "two"), module(t, "kept")
	k := newRemovalKyma(t, op, a, b, kept)
	k.install(a, b, kept)

	k.setModules(kept)
	k.reconcile()
	k.reconcile()
	for _, m := range []string{a, b} {
		manifest, _ := k.manifest(m)
		g.Expect(manifest.DeletionTimestamp.IsZero()).To(BeFalse(), m)
	}
	k.removed(a)
	k.reconcile()
	kyma := k.get()
	g.Expect(removals(kyma, a)).To(HaveLen(1))
	g.Expect(removals(kyma, b)).To(BeEmpty())
	g.Expect(entry(kyma, b).Removal).To(HaveField("Result", v1beta2.OperationInProgress))

	k.removed(b)
	k.reconcile()
	k.reconcile()
	kyma = k.get()
	g.Expect(kyma.Status.Modules).To(ConsistOf(HaveField("Name", kept)))
	g.Expect(removals(kyma, a)).To(HaveLen(1))
	g.Expect(removals(kyma, b)).To(HaveLen(1))
	g.Expect(removals(kyma, kept)).To(BeEmpty())
	g.Expect(kyma.Status.Operations[0].Module).To(Equal(b), "newest first")
}

// A module asked for again before its Manifest was deleted was never
// removed: nothing is recorded. Asked for again once its Manifest is gone,
// the removal is recorded before the new Manifest is made.
func TestModuleAskedForAgain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	op := startOperatorUnderTest(t)
	shop := module(t, "shop")
	k := newRemovalKyma(t, op, shop)
	k.install(shop)
	before, _ := k.manifest(shop)

	k.setModules()
	k.reconcile() // stores the removal
	k.setModules(shop)
	k.reconcile()
	kyma := k.get()
	g.Expect(entry(kyma, shop).Removal).To(BeNil())
	g.Expect(removals(kyma, shop)).To(BeEmpty(), "nothing was removed")
	after, _ := k.manifest(shop)
	g.Expect(after.UID).To(Equal(before.UID))
	g.Expect(after.DeletionTimestamp.IsZero()).To(BeTrue())

	k.setModules()
	k.reconcile()
	k.reconcile()
	k.removed(shop)
	k.setModules(shop) // before any reconcile saw the Manifest go
	k.reconcile()
	kyma = k.get()
	g.Expect(removals(kyma, shop)).To(HaveLen(1))
	_, exists := k.manifest(shop)
	g.Expect(exists).To(BeFalse(), "the new Manifest waits for the removal to be recorded")
	k.reconcile()
	again, exists := k.manifest(shop)
	g.Expect(exists).To(BeTrue())
	g.Expect(again.UID).NotTo(Equal(before.UID))
	g.Expect(removals(k.get(), shop)).To(HaveLen(1))
}

// Deleting the Kyma stores each module's deletion before its Manifest goes;
// one that finishes first is recorded while the other is still removed.
func TestKymaDeletionRecordsEachModule(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	op := startOperatorUnderTest(t)
	a, b := module(t, "one"), module(t, "two")
	k := newRemovalKyma(t, op, a, b)
	k.install(a, b)

	g.Expect(removalsEnv.client.Delete(context.Background(), k.get())).To(Succeed())
	k.reconcile()
	kyma := k.get()
	for _, m := range []string{a, b} {
		g.Expect(entry(kyma, m).Removal).To(HaveField("Type", v1beta2.OperationDeletion), m)
		manifest, _ := k.manifest(m)
		g.Expect(manifest.DeletionTimestamp.IsZero()).To(BeTrue(), "deleted once the deletion is stored")
	}
	k.reconcile()
	k.removed(a)
	k.reconcile()
	kyma = k.get()
	g.Expect(removals(kyma, a)).To(ConsistOf(And(HaveField("Type", v1beta2.OperationDeletion), HaveField("Result", v1beta2.OperationReady))))
	g.Expect(entry(kyma, b).Removal).To(HaveField("Result", v1beta2.OperationInProgress))

	k.removed(b)
	k.reconcile()
	err := removalsEnv.client.Get(context.Background(), client.ObjectKeyFromObject(kyma), &v1beta2.Kyma{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Kyma goes once its modules are gone: %v", err)
}

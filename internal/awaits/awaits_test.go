package awaits

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

var (
	runtime *testcluster.ControlPlane
	admin   client.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if runtime, err = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = runtime.Stop() }()
	if admin, err = client.New(runtime.Config(), client.Options{Scheme: clientgoscheme.Scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// fixture is one test's namespace, Kyma and runtime connection, and the
// awaits under test with the wakes they made.
type fixture struct {
	t       *testing.T
	ns      string
	kyma    string
	cluster *remote.Cluster
	awaits  *Awaits

	mu    sync.Mutex
	woken map[types.NamespacedName]int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "awaits-"}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	f := &fixture{t: t, ns: ns.Name, kyma: "kyma-" + ns.Name, woken: map[types.NamespacedName]int{}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: f.kyma + "-kubeconfig", Namespace: ns.Name, Labels: map[string]string{v1beta2.KymaNameLabel: f.kyma}},
		Data:       map[string][]byte{remote.KubeconfigKey: runtime.Kubeconfig()},
	}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cluster, err := remote.NewCache(admin, admin, remote.Options{Scheme: clientgoscheme.Scheme, Namespace: ns.Name}).Get(ctx, f.kyma)
	if err != nil {
		t.Fatal(err)
	}
	f.cluster = cluster
	f.awaits = New(func(m types.NamespacedName) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.woken[m]++
	})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.awaits.Start(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	return f
}

func (f *fixture) wakes(m types.NamespacedName) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.woken[m]
}

// configMap creates a ConfigMap of the runtime labelled for kyma.
func (f *fixture) configMap(name, kyma string) *corev1.ConfigMap {
	f.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: kyma,
	}}}
	if err := admin.Create(f.t.Context(), cm); err != nil {
		f.t.Fatal(err)
	}
	return cm
}

func pendingOf(cm *corev1.ConfigMap) *apply.Pending {
	return &apply.Pending{
		GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: cm.Namespace, Name: cm.Name,
		ResourceVersion: cm.ResourceVersion, Labels: cm.Labels,
	}
}

// synced waits until the informers of the awaits have listed.
func (f *fixture) synced(g Gomega) {
	g.Eventually(func() bool {
		f.awaits.mu.Lock()
		defer f.awaits.mu.Unlock()
		for _, w := range f.awaits.watches {
			if !w.informer.HasSynced() {
				return false
			}
		}
		return len(f.awaits.watches) > 0
	}, time.Minute, 10*time.Millisecond).Should(BeTrue())
}

func (f *fixture) touch(cm *corev1.ConfigMap) {
	f.t.Helper()
	cm.Data = map[string]string{"at": time.Now().String()}
	if err := admin.Update(f.t.Context(), cm); err != nil {
		f.t.Fatal(err)
	}
}

// TestAChangeWakesTheWaitingManifestOnce: the awaited object changes and
// its Manifest is woken; a second change, with nobody waiting any longer,
// wakes nobody.
func TestAChangeWakesTheWaitingManifestOnce(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	cm := f.configMap("manager", f.kyma)
	other := f.configMap("other", f.kyma)
	m := types.NamespacedName{Namespace: "kcp", Name: "m"}
	g.Expect(f.awaits.Await(f.cluster, f.kyma, m, pendingOf(cm))).To(BeTrue())
	f.synced(g)

	f.touch(other) // another object of the Kyma
	g.Expect(f.wakes(m)).To(BeZero(), "a change to another object woke the Manifest")
	f.touch(cm)
	g.Eventually(func() int { return f.wakes(m) }, time.Minute, 10*time.Millisecond).Should(Equal(1))
	// Woken once: the Manifest's next reconcile waits again if it must.
	f.touch(cm)
	f.touch(other)
	// The later changes are seen by the informer (both objects of one
	// watch) once it delivered the last one; it never wakes m again.
	g.Eventually(func() string {
		return f.stored(cm, "other")
	}, time.Minute, 10*time.Millisecond).Should(Equal(other.ResourceVersion))
	g.Expect(f.wakes(m)).To(Equal(1), "a Manifest no longer waiting was woken")
}

// TestAChangeBeforeTheWaitWakesAtOnce: the object changed between the
// reconcile's read and the Await; the informer already holds the change,
// so the Manifest is woken without another event.
func TestAChangeBeforeTheWaitWakesAtOnce(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	cm := f.configMap("manager", f.kyma)
	read := pendingOf(cm)
	early := types.NamespacedName{Namespace: "kcp", Name: "early"}
	g.Expect(f.awaits.Await(f.cluster, f.kyma, early, read)).To(BeTrue())
	f.synced(g)
	f.touch(cm)
	g.Eventually(func() int { return f.wakes(early) }, time.Minute, 10*time.Millisecond).Should(Equal(1))

	// Now the informer holds the newer version; a Manifest that read the
	// older one waits and is woken at once.
	late := types.NamespacedName{Namespace: "kcp", Name: "late"}
	g.Eventually(func() bool {
		return f.stored(cm, "manager") == cm.ResourceVersion
	}, time.Minute, 10*time.Millisecond).Should(BeTrue())
	g.Expect(f.awaits.Await(f.cluster, f.kyma, late, read)).To(BeTrue())
	g.Expect(f.wakes(late)).To(Equal(1), "a change the informer held before the wait was not told")
}

// TestObjectsNotOursAreLeftToThePoll tries to make the awaits watch what
// the informers cannot select: another Kyma's object, one without our
// label, one not created yet. None is covered; each is left to the poll.
func TestObjectsNotOursAreLeftToThePoll(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	m := types.NamespacedName{Namespace: "kcp", Name: "m"}
	foreign := pendingOf(f.configMap("foreign", "another-kyma"))
	g.Expect(f.awaits.Await(f.cluster, f.kyma, m, foreign)).To(BeFalse(), "another Kyma's object")
	unlabelled := pendingOf(f.configMap("unlabelled", f.kyma))
	delete(unlabelled.Labels, v1beta2.ManagedByLabel)
	g.Expect(f.awaits.Await(f.cluster, f.kyma, m, unlabelled)).To(BeFalse(), "an object without managed-by")
	missing := &apply.Pending{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: f.ns, Name: "missing"}
	g.Expect(f.awaits.Await(f.cluster, f.kyma, m, missing)).To(BeFalse(), "an object not created yet")
	g.Expect(f.awaits.Await(f.cluster, f.kyma, m, nil)).To(BeFalse(), "nothing pending")
	unknown := pendingOf(f.configMap("kind", f.kyma))
	unknown.GVK.Kind = "NoSuchKind"
	g.Expect(f.awaits.Await(f.cluster, f.kyma, m, unknown)).To(BeFalse(), "a kind the runtime does not serve")
	g.Expect(f.awaits.Watching()).To(BeZero())
	var nilAwaits *Awaits
	g.Expect(nilAwaits.Await(f.cluster, f.kyma, m, pendingOf(f.configMap("nil", f.kyma)))).To(BeFalse())
}

// TestDeletionWakesAndIdleInformersStop: deleting the awaited object wakes
// its Manifest; Done stops the waiting, and an informer nobody waits on is
// stopped after linger.
func TestDeletionWakesAndIdleInformersStop(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	advance := f.stopClock()
	cm := f.configMap("manager", f.kyma)
	kept := f.configMap("kept", f.kyma)
	gone := types.NamespacedName{Namespace: "kcp", Name: "gone"}
	done := types.NamespacedName{Namespace: "kcp", Name: "done"}
	g.Expect(f.awaits.Await(f.cluster, f.kyma, gone, pendingOf(cm))).To(BeTrue())
	g.Expect(f.awaits.Await(f.cluster, f.kyma, done, pendingOf(kept))).To(BeTrue())
	f.synced(g)
	g.Expect(f.awaits.Watching()).To(Equal(1), "one informer per runtime, resource and namespace")

	f.awaits.Done(done)
	g.Expect(admin.Delete(t.Context(), cm)).To(Succeed())
	g.Eventually(func() int { return f.wakes(gone) }, time.Minute, 10*time.Millisecond).Should(Equal(1))
	f.touch(kept)
	// The deletion and the touch reach one informer in order: once the
	// touch is in its store, the deletion's event has been handled too.
	g.Eventually(func() bool {
		return f.stored(kept, "kept") == kept.ResourceVersion
	}, time.Minute, 10*time.Millisecond).Should(BeTrue())
	g.Expect(f.wakes(done)).To(BeZero(), "a Manifest that said Done was woken")

	f.awaits.sweep()
	g.Expect(f.awaits.Watching()).To(Equal(1), "an informer is kept for linger after its last wait")
	advance(linger)
	f.awaits.sweep()
	g.Expect(f.awaits.Watching()).To(BeZero(), "an idle informer was not stopped")
}

// TestExpiredWaitsAreForgotten: a Manifest that stopped waiting without
// Done (its reconcile ended in an error) is forgotten after waitTTL.
func TestExpiredWaitsAreForgotten(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	advance := f.stopClock()
	m := types.NamespacedName{Namespace: "kcp", Name: "m"}
	g.Expect(f.awaits.Await(f.cluster, f.kyma, m, pendingOf(f.configMap("manager", f.kyma)))).To(BeTrue())
	advance(waitTTL + time.Second)
	f.awaits.sweep()
	f.awaits.mu.Lock()
	_, waiting := f.awaits.manifest[m]
	f.awaits.mu.Unlock()
	g.Expect(waiting).To(BeFalse())
	advance(linger)
	f.awaits.sweep()
	g.Expect(f.awaits.Watching()).To(BeZero())
}

// stopClock gives the awaits a clock that only advance moves.
func (f *fixture) stopClock() (advance func(time.Duration)) {
	now := time.Now()
	f.awaits.mu.Lock()
	defer f.awaits.mu.Unlock()
	f.awaits.now = func() time.Time { return now } // read with awaits.mu held
	return func(d time.Duration) {
		f.awaits.mu.Lock()
		defer f.awaits.mu.Unlock()
		now = now.Add(d)
	}
}

// stored is the resourceVersion the informer watching cm's kind and
// namespace holds for the named object; "" when it has none.
func (f *fixture) stored(cm *corev1.ConfigMap, name string) string {
	key := f.awaits.keyOf(f.t, f.cluster, f.kyma, cm)
	f.awaits.mu.Lock()
	w := f.awaits.watches[key]
	f.awaits.mu.Unlock()
	if w == nil {
		return ""
	}
	current, _, _ := w.informer.GetStore().GetByKey(f.ns + "/" + name)
	return resourceVersion(current)
}

// keyOf is the watch key the awaits use for cm (tests).
func (a *Awaits) keyOf(t *testing.T, cluster *remote.Cluster, kyma string, cm *corev1.ConfigMap) watchKey {
	t.Helper()
	mapping, err := cluster.Mapper.RESTMapping(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	return watchKey{cluster: cluster, kyma: kyma, resource: mapping.Resource, namespace: cm.Namespace}
}

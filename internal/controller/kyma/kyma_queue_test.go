package kyma

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/priority"
)

func TestModulesSettled(t *testing.T) {
	manifest := func(generation, observed int64, state v1beta2.State) *v1beta2.Manifest {
		m := &v1beta2.Manifest{}
		m.Generation = generation
		m.Status.ObservedGeneration = observed
		m.Status.State = state
		return m
	}
	deleting := manifest(1, 1, v1beta2.StateDeleting)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	tests := []struct {
		name      string
		state     v1beta2.State // the Kyma's
		modules   map[string]v1beta2.State
		manifests map[string]*v1beta2.Manifest
		want      bool
	}{
		{
			name:      "every module Ready at its generation",
			state:     v1beta2.StateProcessing,
			modules:   map[string]v1beta2.State{"a": v1beta2.StateProcessing, "b": v1beta2.StateReady},
			manifests: map[string]*v1beta2.Manifest{"a": manifest(2, 2, v1beta2.StateReady), "b": manifest(1, 1, v1beta2.StateReady)},
			want:      true,
		},
		{
			name:      "Error and Warning are settled too: the Kyma reports them",
			state:     v1beta2.StateProcessing,
			modules:   map[string]v1beta2.State{"a": v1beta2.StateProcessing, "b": v1beta2.StateProcessing},
			manifests: map[string]*v1beta2.Manifest{"a": manifest(1, 1, v1beta2.StateError), "b": manifest(1, 1, v1beta2.StateWarning)},
			want:      true,
		},
		{
			name:      "a module still Processing",
			state:     v1beta2.StateProcessing,
			modules:   map[string]v1beta2.State{"a": v1beta2.StateProcessing, "b": v1beta2.StateProcessing},
			manifests: map[string]*v1beta2.Manifest{"a": manifest(1, 1, v1beta2.StateReady), "b": manifest(1, 1, v1beta2.StateProcessing)},
		},
		{
			name:      "a Ready that is the previous generation's",
			state:     v1beta2.StateProcessing,
			modules:   map[string]v1beta2.State{"a": v1beta2.StateProcessing},
			manifests: map[string]*v1beta2.Manifest{"a": manifest(2, 1, v1beta2.StateReady)},
		},
		{
			name:    "a Manifest not created yet",
			state:   v1beta2.StateProcessing,
			modules: map[string]v1beta2.State{"a": v1beta2.StateProcessing},
		},
		{
			name:      "a removal still running",
			state:     v1beta2.StateProcessing,
			modules:   map[string]v1beta2.State{"a": v1beta2.StateReady, "b": v1beta2.StateDeleting},
			manifests: map[string]*v1beta2.Manifest{"a": manifest(1, 1, v1beta2.StateReady), "b": deleting},
		},
		{
			name:      "a removal finished: its Manifest is gone",
			state:     v1beta2.StateProcessing,
			modules:   map[string]v1beta2.State{"a": v1beta2.StateReady, "b": v1beta2.StateDeleting},
			manifests: map[string]*v1beta2.Manifest{"a": manifest(1, 1, v1beta2.StateReady)},
			want:      true,
		},
		{
			name:    "an unmanaged module has no Manifest to wait for",
			state:   v1beta2.StateReady,
			modules: map[string]v1beta2.State{"a": v1beta2.StateUnmanaged},
			want:    true,
		},
		{
			name:      "a Kyma without status: its first reconcile is not done",
			manifests: map[string]*v1beta2.Manifest{"a": manifest(1, 1, v1beta2.StateReady)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k"}}
			kyma.Status.State = tt.state
			for name, state := range tt.modules {
				kyma.Status.Modules = append(kyma.Status.Modules, v1beta2.ModuleStatus{Name: name, State: state})
			}
			byName := map[string]*v1beta2.Manifest{}
			for module, m := range tt.manifests {
				byName[ManifestName("k", module)] = m
			}
			got := modulesSettled(kyma, func(name string) (*v1beta2.Manifest, error) {
				if m, ok := byName[name]; ok {
					return m, nil
				}
				return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "manifests"}, name)
			})
			if got != tt.want {
				t.Errorf("modulesSettled = %v, want %v", got, tt.want)
			}
		})
	}
}

// newQueue is the priority queue controller-runtime gives the controller.
func newQueue(t *testing.T) priorityqueue.PriorityQueue[reconcile.Request] {
	q := priorityqueue.New[reconcile.Request]("kyma-test")
	t.Cleanup(q.ShutDown)
	return q
}

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "kcp-system", Name: name}}
}

// ownedManifest is a Manifest of the named Kyma, as the Kyma controller
// writes it.
func ownedManifest(kyma string, state v1beta2.State) *v1beta2.Manifest {
	m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{
		Namespace: "kcp-system", Name: kyma + "-a", Generation: 1,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1beta2.GroupVersion.String(), Kind: "Kyma", Name: kyma, UID: "uid", Controller: new(true),
		}},
	}}
	m.Status.State = state
	m.Status.ObservedGeneration = 1
	return m
}

// next takes the next item off the queue and marks it done.
func next(q priorityqueue.PriorityQueue[reconcile.Request]) (reconcile.Request, int) {
	req, priority, _ := q.GetWithPriority()
	q.Done(req)
	return req, priority
}

// A Kyma whose last Manifest settled goes ahead of Kymas enqueued before
// it: new ones, and those a catalog change concerns.
func TestFinishingKymaGoesFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	q := newQueue(t)
	settled := map[string]bool{"finishing": true}
	h := manifestEvents{
		settled:  func(_ context.Context, key client.ObjectKey) bool { return settled[key.Name] },
		progress: time.Hour,
	}
	catalog := newCatalogEvents(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{request("catalog")}
	})
	catalog.quiet, catalog.limit = 0, 0

	catalog.Update(ctx, event.UpdateEvent{ObjectOld: &v1beta2.ModuleReleaseMeta{}, ObjectNew: &v1beta2.ModuleReleaseMeta{}}, q)
	g.Eventually(q.Len).Should(Equal(1))
	q.Add(request("new")) // a new Kyma: the For handler's default priority
	h.Update(ctx, event.UpdateEvent{
		ObjectOld: ownedManifest("finishing", v1beta2.StateProcessing),
		ObjectNew: ownedManifest("finishing", v1beta2.StateReady),
	}, q)
	g.Eventually(q.Len).Should(Equal(3))

	req, prio := next(q)
	g.Expect(req).To(Equal(request("finishing")))
	g.Expect(prio).To(Equal(priority.Finishing))
	req, prio = next(q)
	g.Expect(req).To(Equal(request("new")))
	g.Expect(prio).To(BeZero())
	req, prio = next(q)
	g.Expect(req).To(Equal(request("catalog")))
	g.Expect(prio).To(Equal(priority.Background))
}

// Events that report no settled Kyma wait the progress interval at the low
// priority: a module that settles while others are on their way, our own
// creation of a Manifest, a change of its metadata. A Manifest nobody's
// Kyma controls enqueues nothing.
func TestManifestProgressWaits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	q := newQueue(t)
	h := manifestEvents{
		settled:  func(context.Context, client.ObjectKey) bool { return false },
		progress: time.Hour,
	}
	h.Update(ctx, event.UpdateEvent{
		ObjectOld: ownedManifest("installing", v1beta2.StateProcessing),
		ObjectNew: ownedManifest("installing", v1beta2.StateReady),
	}, q)
	h.Create(ctx, event.CreateEvent{Object: ownedManifest("created", "")}, q)
	withFinalizer := ownedManifest("metadata", v1beta2.StateReady)
	withFinalizer.Finalizers = []string{"f"}
	h.Update(ctx, event.UpdateEvent{ObjectOld: ownedManifest("metadata", v1beta2.StateReady), ObjectNew: withFinalizer}, q)
	orphan := ownedManifest("orphan", v1beta2.StateReady)
	orphan.OwnerReferences = nil
	h.Delete(ctx, event.DeleteEvent{Object: orphan}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: ownedManifest("marker", v1beta2.StateReady), ObjectNew: ownedManifest("marker", v1beta2.StateReady)}, q)

	// Settled now: the same Kyma that waited is ready at once, at the high
	// priority (a queue keeps the highest priority and earliest time).
	h.settled = func(context.Context, client.ObjectKey) bool { return true }
	h.Delete(ctx, event.DeleteEvent{Object: ownedManifest("installing", v1beta2.StateReady)}, q)
	g.Eventually(q.Len).Should(Equal(1))
	req, prio := next(q)
	g.Expect(req).To(Equal(request("installing")))
	g.Expect(prio).To(Equal(priority.Finishing))
	g.Expect(q.Len()).To(BeZero(), "the other Kymas wait for the progress interval")
}

// The progress interval passes: the waiting Kyma is reconciled, at the low
// priority.
func TestManifestProgressIsReportedAfterTheInterval(t *testing.T) {
	g := NewWithT(t)
	q := newQueue(t)
	h := manifestEvents{settled: func(context.Context, client.ObjectKey) bool { return false }, progress: 10 * time.Millisecond}
	h.Update(context.Background(), event.UpdateEvent{
		ObjectOld: ownedManifest("installing", v1beta2.StateProcessing),
		ObjectNew: ownedManifest("installing", v1beta2.StateReady),
	}, q)
	g.Eventually(q.Len).Should(Equal(1))
	req, prio := next(q)
	g.Expect(req).To(Equal(request("installing")))
	g.Expect(prio).To(Equal(priority.Background))
}

// A burst of catalog changes is one queued item per Kyma, enqueued only
// once the burst is over: no Kyma is reconciled between two changes.
func TestCatalogBurstIsOnePassPerKyma(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	q := newQueue(t)
	h := newCatalogEvents(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{request("a"), request(obj.GetName())}
	})
	h.quiet, h.limit = time.Hour, time.Hour
	for _, module := range []string{"alpha", "bravo", "alpha", "charlie"} {
		meta := &v1beta2.ModuleReleaseMeta{ObjectMeta: metav1.ObjectMeta{Name: module}}
		h.Update(ctx, event.UpdateEvent{ObjectOld: meta, ObjectNew: meta}, q)
	}
	g.Expect(q.Len()).To(BeZero(), "nothing is enqueued while the burst goes on")

	h.flush()
	g.Eventually(q.Len).Should(Equal(4))
	var got []reconcile.Request
	for range 4 {
		req, prio := next(q)
		g.Expect(prio).To(Equal(priority.Background))
		got = append(got, req)
	}
	g.Expect(got).To(Equal([]reconcile.Request{request("a"), request("alpha"), request("bravo"), request("charlie")}))
	h.timer.Stop()
}

// Changes that never stop still reach the Kymas: at most limit after the
// first.
func TestCatalogBurstWaitsAtMostTheLimit(t *testing.T) {
	g := NewWithT(t)
	q := newQueue(t)
	h := newCatalogEvents(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{request("a")}
	})
	h.quiet, h.limit = time.Hour, 10*time.Millisecond
	h.Create(context.Background(), event.CreateEvent{Object: &v1beta2.ModuleTemplate{}}, q)
	g.Eventually(q.Len).Should(Equal(1))
	req, prio := next(q)
	g.Expect(req).To(Equal(request("a")))
	g.Expect(prio).To(Equal(priority.Background))
}

// Package awaits brings a module's Manifest back the moment the object its
// readiness waits for (its manager, its default custom resource) changes in
// the runtime, instead of polling it every --requeue-processing (SPEC R15).
//
// It watches the runtime, with or without the runtime watcher's agent,
// through a metadata-only informer per runtime, resource and namespace,
// selected by the labels this operator puts on every object it applies
// (managed-by and the Kyma's name), and only while a Manifest waits there:
// an informer nobody waits on for a while is stopped. A change of the
// object's resourceVersion after the reconcile read it wakes the Manifest.
package awaits

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

const (
	// waitTTL is how long one Await lasts. A Manifest still waiting
	// reconciles, and awaits again, well within it (its safety poll is
	// shorter); one that stopped waiting without Done is forgotten then.
	waitTTL = 2 * time.Minute
	// linger is how long an informer nobody waits on is kept: a module
	// that waits for its manager and then for its custom resource, or the
	// next module of the runtime, reuses it.
	linger = 30 * time.Second
	// sweepEvery is how often expired waits and idle informers are looked
	// for.
	sweepEvery = 10 * time.Second
)

// Awaits wake Manifests when what their readiness waits for changes.
type Awaits struct {
	wake func(types.NamespacedName)
	now  func() time.Time

	mu       sync.Mutex
	watches  map[watchKey]*watch
	manifest map[types.NamespacedName]registration
}

// watchKey is one informer: a runtime connection, a resource, a namespace
// ("" for cluster-scoped objects), and the Kyma whose objects it selects.
type watchKey struct {
	cluster   *remote.Cluster
	kyma      string
	resource  schema.GroupVersionResource
	namespace string
}

// registration is what one Manifest waits for.
type registration struct {
	watch watchKey
	name  string
}

// watch is one running informer and who waits on it, by object name.
type watch struct {
	stop      chan struct{}
	informer  cache.SharedIndexInformer
	waiting   map[string]map[types.NamespacedName]waiter
	idleSince time.Time
}

// waiter is one Manifest waiting for one object.
type waiter struct {
	seen  string // the resourceVersion the reconcile read; "" for missing
	until time.Time
}

// New returns awaits that call wake for a Manifest whose awaited object
// changed; wake must not block.
func New(wake func(types.NamespacedName)) *Awaits {
	return &Awaits{wake: wake, now: time.Now, watches: map[watchKey]*watch{}, manifest: map[types.NamespacedName]registration{}}
}

// Start sweeps expired waits and idle informers until ctx ends, then stops
// every informer (a manager.Runnable).
func (a *Awaits) Start(ctx context.Context) error {
	ticker := time.NewTicker(sweepEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			a.stopAll()
			return nil
		case <-ticker.C:
			a.sweep()
		}
	}
}

// Covers says whether Await can watch for p in kyma's runtime: p exists
// and carries the labels the informers select by. An object this operator
// did not apply, or one not created yet, is left to the poll.
func Covers(p *apply.Pending, kyma string) bool {
	return p != nil && p.ResourceVersion != "" &&
		p.Labels[v1beta2.ManagedByLabel] == v1beta2.ManagedByValue && p.Labels[v1beta2.KymaNameLabel] == kyma
}

// Await wakes manifest once p changes in the runtime of cluster, or at once
// when it changed since it was read. It replaces what manifest waited for
// before. false means nothing watches for it (Covers is false, or the kind
// cannot be watched): the caller keeps polling.
func (a *Awaits) Await(cluster *remote.Cluster, kyma string, manifest types.NamespacedName, p *apply.Pending) bool {
	if a == nil || !Covers(p, kyma) {
		a.Done(manifest)
		return false
	}
	mapping, err := cluster.Mapper.RESTMapping(p.GVK.GroupKind(), p.GVK.Version)
	if err != nil {
		a.Done(manifest)
		return false
	}
	key := watchKey{cluster: cluster, kyma: kyma, resource: mapping.Resource, namespace: p.Namespace}
	a.mu.Lock()
	a.forget(manifest)
	w := a.watches[key]
	if w == nil {
		if w, err = start(cluster, key, a.changed(key)); err != nil {
			a.mu.Unlock()
			return false
		}
		a.watches[key] = w
	}
	if w.waiting[p.Name] == nil {
		w.waiting[p.Name] = map[types.NamespacedName]waiter{}
	}
	w.waiting[p.Name][manifest] = waiter{seen: p.ResourceVersion, until: a.now().Add(waitTTL)}
	w.idleSince = time.Time{}
	a.manifest[manifest] = registration{watch: key, name: p.Name}
	// A change between the reconcile's read and now may have reached the
	// informer before anyone waited for it: compare with what it holds. (An
	// informer behind the read wakes the Manifest once too often; one that
	// has not seen the object yet will, and its event decides.)
	changed := false
	if w.informer.HasSynced() {
		current, exists, _ := w.informer.GetStore().GetByKey(storeKey(p.Namespace, p.Name))
		changed = exists && resourceVersion(current) != p.ResourceVersion
	}
	if changed {
		a.forget(manifest)
	}
	a.mu.Unlock()
	if changed {
		a.wake(manifest)
	}
	return true
}

// Done says that manifest no longer waits.
func (a *Awaits) Done(manifest types.NamespacedName) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forget(manifest)
}

// Watching is how many informers run (tests, metrics).
func (a *Awaits) Watching() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.watches)
}

// forget drops manifest's wait; a.mu is held.
func (a *Awaits) forget(manifest types.NamespacedName) {
	reg, ok := a.manifest[manifest]
	if !ok {
		return
	}
	delete(a.manifest, manifest)
	w := a.watches[reg.watch]
	if w == nil {
		return
	}
	delete(w.waiting[reg.name], manifest)
	if len(w.waiting[reg.name]) == 0 {
		delete(w.waiting, reg.name)
	}
	if len(w.waiting) == 0 {
		w.idleSince = a.now()
	}
}

// changed is the informer's handler: every Manifest waiting for the object
// that now has another resourceVersion than it read is woken, once.
func (a *Awaits) changed(key watchKey) cache.ResourceEventHandler {
	handle := func(obj any, deleted bool) {
		name, version := nameOf(obj)
		if deleted {
			version = "" // gone: changed, whatever was read
		}
		a.mu.Lock()
		w := a.watches[key]
		var wake []types.NamespacedName
		if w != nil {
			for manifest, wt := range w.waiting[name] {
				if wt.seen != version {
					wake = append(wake, manifest)
				}
			}
		}
		for _, manifest := range wake {
			a.forget(manifest)
		}
		a.mu.Unlock()
		for _, manifest := range wake {
			a.wake(manifest)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { handle(obj, false) },
		UpdateFunc: func(_, obj any) { handle(obj, false) },
		DeleteFunc: func(obj any) { handle(obj, true) },
	}
}

// sweep forgets expired waits and stops informers idle past linger.
func (a *Awaits) sweep() {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for manifest, reg := range a.manifest {
		w := a.watches[reg.watch]
		if w == nil || now.After(w.waiting[reg.name][manifest].until) {
			a.forget(manifest)
		}
	}
	for key, w := range a.watches {
		if len(w.waiting) == 0 && !w.idleSince.IsZero() && now.Sub(w.idleSince) >= linger {
			close(w.stop)
			delete(a.watches, key)
		}
	}
}

func (a *Awaits) stopAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, w := range a.watches {
		close(w.stop)
		delete(a.watches, key)
	}
	clear(a.manifest)
}

// start runs a metadata informer for key's objects of its Kyma.
func start(cluster *remote.Cluster, key watchKey, handler cache.ResourceEventHandler) (*watch, error) {
	client, err := cluster.Metadata()
	if err != nil {
		return nil, err
	}
	selector := labels.SelectorFromSet(labels.Set{v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: key.kyma}).String()
	informer := metadatainformer.NewFilteredMetadataInformer(client, key.resource, key.namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	if _, err := informer.Informer().AddEventHandler(handler); err != nil {
		return nil, err
	}
	w := &watch{stop: make(chan struct{}), informer: informer.Informer(), waiting: map[string]map[types.NamespacedName]waiter{}}
	go w.informer.Run(w.stop)
	return w, nil
}

func storeKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// nameOf is an informer object's name and resourceVersion, a tombstone's
// included.
func nameOf(obj any) (name, version string) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName(), m.GetResourceVersion()
	}
	return "", ""
}

func resourceVersion(obj any) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetResourceVersion()
	}
	return ""
}

package manifest

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// The periodic drift check of Ready Manifests, a Kyma at a time. A Ready
// Manifest used to requeue itself every Ready interval, and each requeue was
// a whole reconcile: the work queue, a copy of the Manifest, the skeleton,
// the status comparison. Across a fleet that was most of an idle operator's
// CPU, for a check that nearly always finds nothing. Now a Manifest whose
// reconcile ends Ready with a remembered fingerprint (manifest_drift.go) is
// handed to checks instead. At its Kyma's moment (requeue.Aligned) checks
// looks at all of the Kyma's due Manifests in one pass, reading only:
// their objects' versions (from the listings the Kyma's checks share),
// their default custom resource and readiness. A Manifest whose check finds
// anything else — changed objects, a module no longer Ready, a Manifest
// changed or being deleted, a runtime that cannot be reached — is
// reconciled, in full, which also schedules its next check.

// checkSlack is how much later than the Kyma's moment a Manifest may be
// due and still be checked in the same pass: the Manifests of a Kyma that
// share an interval are due at the same moment, give or take the time
// between their reconciles.
const checkSlack = 5 * time.Second

// checks holds the Ready Manifests waiting for their next check, by Kyma,
// and checks them with a few workers.
type checks struct {
	r       *Reconciler
	workers int
	// queue holds each Kyma with Manifests waiting, until the earliest is
	// due.
	queue workqueue.TypedDelayingInterface[client.ObjectKey]
	// found carries the Manifests whose check asks for a full reconcile to
	// the controller's queue.
	found chan event.TypedGenericEvent[*v1beta2.Manifest]

	mu sync.Mutex
	// due is, per Kyma, when each of its Manifests (by name) is due.
	due map[client.ObjectKey]map[string]time.Time
}

func newChecks(r *Reconciler, workers int) *checks {
	return &checks{
		r:       r,
		workers: max(workers, 1),
		queue:   workqueue.NewTypedDelayingQueue[client.ObjectKey](),
		found:   make(chan event.TypedGenericEvent[*v1beta2.Manifest], 1024),
		due:     map[client.ObjectKey]map[string]time.Time{},
	}
}

// schedule checks the Manifest after the given wait.
func (c *checks) schedule(manifest *v1beta2.Manifest, after time.Duration) {
	kyma := client.ObjectKey{Namespace: manifest.Namespace, Name: kymaName(manifest)}
	c.mu.Lock()
	c.dueOf(kyma)[manifest.Name] = time.Now().Add(after)
	c.mu.Unlock()
	c.queue.AddAfter(kyma, after)
}

// dueOf is the Kyma's schedule, made when it has none; c.mu is held.
func (c *checks) dueOf(kyma client.ObjectKey) map[string]time.Time {
	names := c.due[kyma]
	if names == nil {
		names = map[string]time.Time{}
		c.due[kyma] = names
	}
	return names
}

// unschedule forgets the Manifest's next check: its reconcile ended in
// another state, which requeues it by itself.
func (c *checks) unschedule(manifest *v1beta2.Manifest) {
	kyma := client.ObjectKey{Namespace: manifest.Namespace, Name: kymaName(manifest)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if names := c.due[kyma]; names != nil {
		delete(names, manifest.Name)
		if len(names) == 0 {
			delete(c.due, kyma)
		}
	}
}

// take removes and returns the Kyma's Manifests due by the deadline, and
// how long until the next of the others is due (zero: none left).
func (c *checks) take(kyma client.ObjectKey, now time.Time) (due []string, next time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := c.due[kyma]
	var earliest time.Time
	for name, at := range names {
		if !at.After(now.Add(checkSlack)) {
			due = append(due, name)
			delete(names, name)
			continue
		}
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	if len(names) == 0 {
		delete(c.due, kyma)
	}
	if !earliest.IsZero() {
		next = max(earliest.Sub(now), time.Millisecond)
	}
	return due, next
}

// Start runs the workers until ctx ends. checks is a manager Runnable that
// needs the leader, as the controller that feeds it does.
func (c *checks) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	wg.Wait()
	return nil
}

func (c *checks) next(ctx context.Context) bool {
	kyma, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(kyma)
	c.checkKyma(ctx, kyma)
	return true
}

// checkKyma checks the Kyma's due Manifests, with one of its runtime's
// worker slots.
func (c *checks) checkKyma(ctx context.Context, kyma client.ObjectKey) {
	now := time.Now()
	names, next := c.take(kyma, now)
	if next > 0 {
		c.queue.AddAfter(kyma, next)
	}
	if len(names) == 0 {
		return
	}
	log := ctrl.LoggerFrom(ctx).WithValues("kyma", kyma)
	ctx = ctrl.LoggerInto(ctx, log)
	release, wait := remote.Gate(c.r.Runtimes, "manifest", kyma.Name, "checks/"+kyma.String(), nil)
	if release == nil {
		c.putBack(kyma, names, wait)
		return
	}
	defer release()

	// The Kyma decides whether its runtime is touched at all; the
	// Manifests of a Kyma that is gone or paused are left to their
	// reconciles, which resuming the Kyma starts (manifestsOfKyma).
	k := &v1beta2.Kyma{}
	if err := c.r.Get(ctx, kyma, k, client.UnsafeDisableDeepCopy); err != nil {
		if !apierrors.IsNotFound(err) {
			c.reconcile(ctx, kyma.Namespace, names...)
		}
		return
	}
	if c.r.Pause.Paused(k) {
		// A hibernating Kyma wakes by itself: its checks wait for it.
		if wake := c.r.Pause.Wake(k); wake > 0 {
			c.putBack(kyma, names, wake)
		}
		return
	}
	cluster, err := c.r.Runtimes.Get(ctx, kyma.Name)
	if err != nil {
		c.reconcile(ctx, kyma.Namespace, names...)
		return
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		c.checkManifest(ctx, cluster, client.ObjectKey{Namespace: kyma.Namespace, Name: name})
	}
}

// checkManifest schedules the Manifest's next check when it is as its last
// reconcile left it, and reconciles it otherwise.
func (c *checks) checkManifest(ctx context.Context, cluster *remote.Cluster, key client.ObjectKey) {
	// Read only: the cache's own copy will do.
	manifest := &v1beta2.Manifest{}
	if err := c.r.Get(ctx, key, manifest, client.UnsafeDisableDeepCopy); err != nil {
		if !apierrors.IsNotFound(err) {
			c.reconcile(ctx, key.Namespace, key.Name)
		}
		return
	}
	if !manifest.DeletionTimestamp.IsZero() || manifest.Status.State != v1beta2.StateReady ||
		!c.r.unchanged(ctx, cluster, manifest) || !c.r.moduleReady(ctx, cluster, manifest) {
		metrics.ManifestChecks.WithLabelValues(metrics.CheckReconcile).Inc()
		c.reconcile(ctx, key.Namespace, key.Name)
		return
	}
	metrics.ManifestChecks.WithLabelValues(metrics.CheckUnchanged).Inc()
	c.schedule(manifest, c.r.readyAfter(ctx, cluster, manifest))
}

// putBack schedules the Manifests again after wait: their runtime had no
// free worker slot.
func (c *checks) putBack(kyma client.ObjectKey, names []string, wait time.Duration) {
	at := time.Now().Add(wait)
	c.mu.Lock()
	due := c.dueOf(kyma)
	for _, name := range names {
		if _, scheduled := due[name]; !scheduled {
			due[name] = at
		}
	}
	c.mu.Unlock()
	c.queue.AddAfter(kyma, wait)
}

// reconcile hands the named Manifests to the controller.
func (c *checks) reconcile(ctx context.Context, namespace string, names ...string) {
	for _, name := range names {
		m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		select {
		case c.found <- event.TypedGenericEvent[*v1beta2.Manifest]{Object: m}:
		case <-ctx.Done():
			return
		}
	}
}

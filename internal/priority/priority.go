// Package priority orders the controllers' work queues, which are
// controller-runtime's priority queue (higher first, first in first out
// within one priority), so that runtimes finish one after another (SPEC R15)
// instead of all at the end: work that has begun finishes before new work
// starts, and periodic checks wait until nothing else does.
package priority

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	// Finishing is work on its way to a result: a Kyma whose modules have
	// all settled, a Manifest being installed that waits for a runtime slot
	// or for its resources to become ready.
	Finishing = 10
	// Background is work that finishes nothing: periodic checks, retries at
	// the Error interval, catalog fan-outs, echoes of our own writes.
	Background = -10
)

// Add puts requests on q with opts; on a queue without priorities, with
// opts.After alone.
func Add(q workqueue.TypedRateLimitingInterface[reconcile.Request], opts priorityqueue.AddOpts, requests ...reconcile.Request) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(opts, requests...)
		return
	}
	for _, req := range requests {
		if opts.After > 0 {
			q.AddAfter(req, opts.After)
			continue
		}
		q.Add(req)
	}
}

// Requeues wraps a reconciler so that what it asks to be requeued comes back
// in order. Without it a requeue keeps the priority its item was taken
// with, so a Ready object's periodic check could go ahead of an install.
type Requeues struct {
	reconcile.Reconciler
	// Periodic: a requeue this far off, or further, is a periodic check or a
	// retry at the Error interval, and comes back at Background.
	Periodic time.Duration
	// InFlight: a sooner requeue is an object on its way (Processing,
	// waiting for a runtime slot, a conflict), and comes back at Finishing,
	// ahead of objects not yet started, so that one runtime's last module
	// does not wait behind every other runtime's first.
	InFlight bool
}

// Reconcile runs the wrapped reconciler and sets the priority of its
// requeue. An error keeps the item's priority for its backoff.
func (r Requeues) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.Reconciler.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 || res.Priority != nil {
		return res, err
	}
	switch {
	case res.RequeueAfter >= r.Periodic:
		res.Priority = new(Background)
	case r.InFlight:
		res.Priority = new(Finishing)
	}
	return res, err
}

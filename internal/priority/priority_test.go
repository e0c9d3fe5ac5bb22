package priority_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/internal/priority"
)

func TestRequeuesSetsThePriorityOfARequeue(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name     string
		inFlight bool
		result   reconcile.Result
		err      error
		want     *int
	}{
		{name: "a periodic check waits behind everything", result: reconcile.Result{RequeueAfter: time.Minute}, want: new(priority.Background)},
		{name: "so does a retry at the Error interval", result: reconcile.Result{RequeueAfter: 30 * time.Second}, want: new(priority.Background)},
		{name: "work on its way finishes first", inFlight: true, result: reconcile.Result{RequeueAfter: time.Second}, want: new(priority.Finishing)},
		{name: "unless the controller does not rank it", result: reconcile.Result{RequeueAfter: time.Second}},
		{name: "an error keeps the item's priority for its backoff", inFlight: true, result: reconcile.Result{RequeueAfter: time.Second}, err: errBoom},
		{name: "no requeue, no priority", inFlight: true},
		{name: "the reconciler's own choice stands", inFlight: true, result: reconcile.Result{RequeueAfter: time.Second, Priority: new(3)}, want: new(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := priority.Requeues{
				Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return tt.result, tt.err }),
				Periodic:   30 * time.Second,
				InFlight:   tt.inFlight,
			}
			got, err := r.Reconcile(context.Background(), reconcile.Request{})
			if tt.err == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tt.err))
			}
			g.Expect(got.RequeueAfter).To(Equal(tt.result.RequeueAfter))
			if tt.want == nil {
				g.Expect(got.Priority).To(BeNil())
			} else {
				g.Expect(got.Priority).To(HaveValue(Equal(*tt.want)))
			}
		})
	}
}

func TestAdd(t *testing.T) {
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}
	}
	t.Run("a priority queue gets the options", func(t *testing.T) {
		g := NewWithT(t)
		q := priorityqueue.New[reconcile.Request]("test")
		defer q.ShutDown()
		priority.Add(q, priorityqueue.AddOpts{Priority: new(priority.Background)}, req("low"))
		priority.Add(q, priorityqueue.AddOpts{Priority: new(priority.Finishing)}, req("high"))
		priority.Add(q, priorityqueue.AddOpts{After: time.Hour}, req("later"))
		g.Eventually(q.Len).Should(Equal(2))
		first, p, _ := q.GetWithPriority()
		g.Expect(first).To(Equal(req("high")))
		g.Expect(p).To(Equal(priority.Finishing))
		second, p, _ := q.GetWithPriority()
		g.Expect(second).To(Equal(req("low")))
		g.Expect(p).To(Equal(priority.Background))
	})
	t.Run("a plain queue gets the delay alone", func(t *testing.T) {
		g := NewWithT(t)
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer q.ShutDown()
		priority.Add(q, priorityqueue.AddOpts{Priority: new(priority.Finishing)}, req("now"))
		priority.Add(q, priorityqueue.AddOpts{After: time.Hour}, req("later"))
		g.Expect(q.Len()).To(Equal(1))
		got, _ := q.Get()
		g.Expect(got).To(Equal(req("now")))
	})
}

package priority

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// wakesBuffer is how many wakes may wait to reach the queue. A wake that
// finds it full is dropped: the object was requeued anyway, and only comes
// back later than it could have.
const wakesBuffer = 1024

// Wakes bring objects back to their controller's queue at once, at
// Finishing priority, from outside the controller's watches: a runtime slot
// that freed up, an object in a runtime that a waiting module depends on.
// The controller watches Source.
type Wakes struct {
	ch chan event.TypedGenericEvent[types.NamespacedName]
}

// NewWakes returns wakes for one controller.
func NewWakes() *Wakes {
	return &Wakes{ch: make(chan event.TypedGenericEvent[types.NamespacedName], wakesBuffer)}
}

// Wake brings key back; it never blocks.
func (w *Wakes) Wake(key types.NamespacedName) {
	if w == nil {
		return
	}
	select {
	case w.ch <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
	default:
	}
}

// Source is what the controller watches to receive the wakes.
func (w *Wakes) Source() source.Source {
	return source.Channel(w.ch, handler.TypedFuncs[types.NamespacedName, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			Add(q, priorityqueue.AddOpts{Priority: new(Finishing)}, reconcile.Request{NamespacedName: e.Object})
		},
	})
}

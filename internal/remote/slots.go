package remote

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// SlotRetryDelay is how soon a reconcile that found every slot of its
// runtime taken looks again. Short, because slots free up as soon as a
// reconcile ends; jittered so that waiting reconciles do not all come back at
// once.
const SlotRetryDelay = time.Second

// Slots caps how many reconciles work on one runtime at once, across every
// controller that talks to runtimes. Without it a runtime whose API server
// or admission webhook hangs would hold every worker of a controller, and no
// other runtime would make progress. A reconcile that finds no free slot does
// not wait (that would hold its worker all the same): it requeues.
type Slots struct {
	max int

	mu   sync.Mutex
	busy map[string]int // by Kyma name
}

// NewSlots returns slots for up to perRuntime reconciles per runtime at once;
// zero or less means no cap.
func NewSlots(perRuntime int) *Slots {
	return &Slots{max: perRuntime, busy: map[string]int{}}
}

// TryAcquire takes a slot of the named Kyma's runtime for controller. When
// it returns ok, release must be called once the reconcile is done with the
// runtime. When every slot is taken it returns at once with ok false, and
// counts the miss for controller.
func (s *Slots) TryAcquire(controller, kymaName string) (release func(), ok bool) {
	if s == nil || s.max <= 0 {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[kymaName] >= s.max {
		metrics.RuntimeSlotsFull.WithLabelValues(controller).Inc()
		return nil, false
	}
	s.busy[kymaName]++
	var once sync.Once
	return func() { once.Do(func() { s.release(kymaName) }) }, true
}

func (s *Slots) release(kymaName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[kymaName] <= 1 {
		delete(s.busy, kymaName)
		return
	}
	s.busy[kymaName]--
}

// RetryAfter is when a reconcile that found no free slot should come back:
// SlotRetryDelay plus up to half of it again.
func RetryAfter() time.Duration {
	return SlotRetryDelay + rand.N(SlotRetryDelay/2) //nolint:gosec // jitter, not security
}

// Gate admits one reconcile of controller for the named Kyma's runtime, in
// the shape reconciler.Phases.Gate wants: a release func, or how long to
// wait when the runtime already has its share of workers (the reconcile then
// waits its turn without holding a worker).
func Gate(runtimes Runtimes, controller, kymaName string) (release func(), wait time.Duration) {
	release, ok := runtimes.TryAcquire(controller, kymaName)
	if !ok {
		return nil, RetryAfter()
	}
	return release, 0
}

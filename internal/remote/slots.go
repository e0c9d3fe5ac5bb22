package remote

import (
	"maps"
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
//
// Slots count by a key that names the runtime; Cache keys them by the API
// server of the runtime's kubeconfig (see Cache.TryAcquire), so that Kymas
// registered against one server share its cap.
type Slots struct {
	max int

	mu   sync.Mutex
	busy map[string]int // by runtime key
}

// NewSlots returns slots for up to perRuntime reconciles per runtime at once;
// zero or less means no cap.
func NewSlots(perRuntime int) *Slots {
	return &Slots{max: perRuntime, busy: map[string]int{}}
}

// capped says whether the slots limit anything.
func (s *Slots) capped() bool { return s != nil && s.max > 0 }

// TryAcquire takes a slot of the runtime named by key for controller. When
// it returns ok, release must be called once the reconcile is done with the
// runtime. When every slot is taken it returns at once with ok false, and
// counts the miss for controller.
func (s *Slots) TryAcquire(controller, key string) (release func(), ok bool) {
	if !s.capped() {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[key] >= s.max {
		metrics.RuntimeSlotsFull.WithLabelValues(controller).Inc()
		return nil, false
	}
	s.busy[key]++
	var once sync.Once
	return func() { once.Do(func() { s.release(key) }) }, true
}

func (s *Slots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[key] <= 1 {
		delete(s.busy, key)
		return
	}
	s.busy[key]--
}

// inUse is how many slots each runtime key holds (tests).
func (s *Slots) inUse() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.busy)
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

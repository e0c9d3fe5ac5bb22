package remote

import (
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// SlotRetryDelay is how soon a reconcile that found every slot of its
// runtime taken looks again, unless a slot freed earlier woke it. Short,
// because slots free up as soon as a reconcile ends; jittered so that
// waiting reconciles do not all come back at once.
const SlotRetryDelay = time.Second

const (
	// slowHold is how long a reconcile may hold a slot and still count as
	// proof that its runtime answers. A runtime whose API server or webhook
	// hangs holds its slots for up to the request timeout; one that answers
	// finishes a reconcile, CRD establishment included, well within this.
	slowHold = 5 * time.Second
	// proofWindow is how long a fast reconcile keeps proving that its
	// runtime answers.
	proofWindow = 30 * time.Second
	// waiterTTL is how long a reconcile turned away counts as waiting for
	// its runtime: it comes back by itself within RetryAfter, so one that
	// has not come back since is no longer waiting.
	waiterTTL = 2 * SlotRetryDelay
)

// Slots cap how many reconciles work on one runtime at once, across every
// controller that talks to runtimes. Without a cap a runtime whose API
// server or admission webhook hangs would hold every worker of a
// controller, and no other runtime would make progress. A reconcile that
// finds no free slot does not wait (that would hold its worker all the
// same): it requeues, and the next slot its runtime frees wakes it.
//
// The cap is work-conserving (SPEC R15): it only holds a runtime back
// while another may need the workers. A reconcile over its runtime's cap
// borrows a worker when all of these hold:
//   - its controller keeps at least one worker free after it, so a
//     reconcile of another runtime that arrives meanwhile finds one at once
//     (Workers tells how many a controller has; without it, no borrowing);
//   - no reconcile of another runtime waits for a slot of its own;
//   - its runtime answers: a reconcile of this controller for it finished
//     within slowHold in the last proofWindow, and none of its reconciles
//     at work has held its slot longer than slowHold.
//
// So a lone, healthy runtime gets every worker but one, and a hanging one
// never more than the cap: its reconciles never finish fast.
//
// Slots count by a key that names the runtime; Cache keys them by the API
// server of the runtime's kubeconfig (see Cache.TryAcquire), so that Kymas
// registered against one server share its cap.
type Slots struct {
	max int
	now func() time.Time

	mu       sync.Mutex
	busy     map[string]int // by runtime key
	workers  map[string]int // by controller
	inFlight map[string]int // by controller
	holds    map[holdKey]*holds
	waiters  map[string]map[string]waiter // by runtime key, then by who waits
}

// holdKey is one controller's work on one runtime.
type holdKey struct{ controller, key string }

// holds is what one controller's work on one runtime tells of it.
type holds struct {
	started  []time.Time // of the reconciles at work
	lastFast time.Time   // when a reconcile last finished within slowHold
}

// waiter is a reconcile turned away, with how to wake it.
type waiter struct {
	wake func()
	at   time.Time
}

// NewSlots returns slots for up to perRuntime reconciles per runtime at once;
// zero or less means no cap.
func NewSlots(perRuntime int) *Slots {
	return &Slots{
		max: perRuntime, now: time.Now,
		busy: map[string]int{}, workers: map[string]int{}, inFlight: map[string]int{},
		holds: map[holdKey]*holds{}, waiters: map[string]map[string]waiter{},
	}
}

// capped says whether the slots limit anything.
func (s *Slots) capped() bool { return s != nil && s.max > 0 }

// Workers tells how many reconciles controller runs at once, which lets
// its reconciles borrow idle workers beyond their runtime's cap.
func (s *Slots) Workers(controller string, n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workers[controller] = n
}

// TryAcquire takes a slot of the runtime named by key for controller. When
// it returns ok, release must be called once the reconcile is done with the
// runtime. When every slot is taken and none may be borrowed, it returns at
// once with ok false and counts the miss for controller; a non-nil wake is
// then called (once, from another goroutine's release) when the runtime
// frees a slot. who names the reconcile (controller and object), so that
// one object waits once.
func (s *Slots) TryAcquire(controller, key, who string, wake func()) (release func(), ok bool) {
	if !s.capped() {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	hk := holdKey{controller, key}
	switch {
	case s.busy[key] < s.max:
	case s.mayBorrow(hk, now):
		metrics.RuntimeSlotsBorrowed.WithLabelValues(controller).Inc()
	default:
		metrics.RuntimeSlotsFull.WithLabelValues(controller).Inc()
		if wake != nil {
			if s.waiters[key] == nil {
				s.waiters[key] = map[string]waiter{}
			}
			s.waiters[key][who] = waiter{wake: wake, at: now}
		}
		return nil, false
	}
	if w := s.waiters[key]; w != nil {
		delete(w, who)
		if len(w) == 0 {
			delete(s.waiters, key)
		}
	}
	s.busy[key]++
	s.inFlight[controller]++
	h := s.holds[hk]
	if h == nil {
		h = &holds{}
		s.holds[hk] = h
	}
	h.started = append(h.started, now)
	var once sync.Once
	return func() { once.Do(func() { s.release(hk, now) }) }, true
}

// mayBorrow says whether a reconcile of hk over its runtime's cap may take
// a worker nobody else needs; see Slots.
func (s *Slots) mayBorrow(hk holdKey, now time.Time) bool {
	workers := s.workers[hk.controller]
	if workers == 0 || s.inFlight[hk.controller]+2 > workers {
		return false
	}
	for key, waiting := range s.waiters {
		if key == hk.key {
			continue
		}
		for _, w := range waiting {
			if now.Sub(w.at) < waiterTTL {
				return false
			}
		}
	}
	h := s.holds[hk]
	if h == nil || h.lastFast.IsZero() || now.Sub(h.lastFast) > proofWindow {
		return false
	}
	for _, started := range h.started {
		if now.Sub(started) > slowHold {
			return false
		}
	}
	return true
}

func (s *Slots) release(hk holdKey, started time.Time) {
	s.mu.Lock()
	now := s.now()
	if s.busy[hk.key] <= 1 {
		delete(s.busy, hk.key)
	} else {
		s.busy[hk.key]--
	}
	if s.inFlight[hk.controller] <= 1 {
		delete(s.inFlight, hk.controller)
	} else {
		s.inFlight[hk.controller]--
	}
	if h := s.holds[hk]; h != nil {
		if i := slices.Index(h.started, started); i >= 0 {
			h.started = slices.Delete(h.started, i, i+1)
		}
		if now.Sub(started) <= slowHold {
			h.lastFast = now
		}
		if len(h.started) == 0 && (h.lastFast.IsZero() || now.Sub(h.lastFast) > proofWindow) {
			delete(s.holds, hk)
		}
	}
	wake := s.toWake(hk, now)
	s.mu.Unlock()
	for _, w := range wake {
		w()
	}
}

// toWake takes the reconciles to wake now that hk freed a slot: every one
// waiting for the runtime when they may borrow, else the one that waited
// longest. Waiters past waiterTTL have come back by themselves.
func (s *Slots) toWake(hk holdKey, now time.Time) []func() {
	waiting := s.waiters[hk.key]
	if len(waiting) == 0 {
		return nil
	}
	whos := slices.SortedFunc(maps.Keys(waiting), func(a, b string) int { return waiting[a].at.Compare(waiting[b].at) })
	if !s.mayBorrow(hk, now) {
		whos = whos[:1]
	}
	var wake []func()
	for _, who := range whos {
		wake = append(wake, waiting[who].wake)
		delete(waiting, who)
	}
	if len(waiting) == 0 {
		delete(s.waiters, hk.key)
	}
	return wake
}

// inUse is how many slots each runtime key holds (tests).
func (s *Slots) inUse() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.busy)
}

// RetryAfter is when a reconcile that found no free slot should come back
// if no freed slot wakes it first: SlotRetryDelay plus up to half of it
// again.
func RetryAfter() time.Duration {
	return SlotRetryDelay + rand.N(SlotRetryDelay/2) //nolint:gosec // jitter, not security
}

// Gate admits one reconcile of controller for the named Kyma's runtime, in
// the shape reconciler.Phases.Gate wants: a release func, or how long to
// wait when the runtime already has its share of workers (the reconcile then
// waits its turn without holding a worker). who names the object; wake, when
// not nil, brings the reconcile back as soon as the runtime frees a slot.
func Gate(runtimes Runtimes, controller, kymaName, who string, wake func()) (release func(), wait time.Duration) {
	release, ok := runtimes.TryAcquire(controller, kymaName, controller+"/"+who, wake)
	if !ok {
		return nil, RetryAfter()
	}
	return release, 0
}

package remote

import (
	"fmt"
	"testing"
	"time"
)

// clockedSlots are slots with a clock the test moves.
func clockedSlots(perRuntime int) (*Slots, *time.Time) {
	s := NewSlots(perRuntime)
	now := time.Unix(1_000_000, 0)
	s.now = func() time.Time { return now }
	return s, &now
}

// acquire takes a slot and fails the test when it gets none.
func acquire(t *testing.T, s *Slots, controller, key, who string) func() {
	t.Helper()
	release, ok := s.TryAcquire(controller, key, who, nil)
	if !ok {
		t.Fatalf("%s of %s got no slot (in use: %v)", who, key, s.inUse())
	}
	return release
}

// TestSlotsLendIdleWorkersToALoneRuntime: a runtime alone at work gets
// every worker but one once a reconcile of it finished fast; the last
// worker stays free for a runtime that arrives.
func TestSlotsLendIdleWorkersToALoneRuntime(t *testing.T) {
	s, _ := clockedSlots(2)
	s.Workers("manifest", 6)
	first := acquire(t, s, "manifest", "a", "m0")
	acquire(t, s, "manifest", "a", "m1")
	if _, ok := s.TryAcquire("manifest", "a", "m2", nil); ok {
		t.Fatal("a runtime that has not yet shown that it answers borrowed beyond its cap")
	}
	first() // finished at once: the runtime answers
	for i := range 4 {
		acquire(t, s, "manifest", "a", fmt.Sprint("n", i))
	}
	if _, ok := s.TryAcquire("manifest", "a", "n4", nil); ok {
		t.Fatal("the runtime took the last free worker; one must stay free for another runtime")
	}
	if got := s.inUse()["a"]; got != 5 {
		t.Fatalf("in use %d, want 5 (every worker of 6 but one)", got)
	}
	// Another runtime still gets a slot of its own at once: the cap, not
	// the lending, decides for it.
	acquire(t, s, "manifest", "b", "b0")
}

// TestSlotsLendOnlyPerController: workers are counted per controller, and
// so is the proof that a runtime answers; a controller whose workers are
// not known never lends.
func TestSlotsLendOnlyPerController(t *testing.T) {
	s, _ := clockedSlots(1)
	s.Workers("manifest", 8)
	acquire(t, s, "kyma", "a", "k")()
	acquire(t, s, "manifest", "a", "m0")
	if _, ok := s.TryAcquire("manifest", "a", "m1", nil); ok {
		t.Fatal("a fast Kyma reconcile proved the runtime for the Manifest controller")
	}
	s2, _ := clockedSlots(1)
	acquire(t, s2, "manifest", "a", "m0")()
	acquire(t, s2, "manifest", "a", "m1")
	if _, ok := s2.TryAcquire("manifest", "a", "m2", nil); ok {
		t.Fatal("a controller whose workers are unknown lent one")
	}
}

// TestSlotsNeverLendToAHangingRuntime tries to make a hanging runtime hold
// more than its cap: its reconciles hold their slots past slowHold, or
// finish only after it, and it never borrows.
func TestSlotsNeverLendToAHangingRuntime(t *testing.T) {
	s, now := clockedSlots(2)
	s.Workers("manifest", 16)
	acquire(t, s, "manifest", "a", "m0")() // proof: fast
	hung := acquire(t, s, "manifest", "a", "m1")
	acquire(t, s, "manifest", "a", "m2")
	*now = now.Add(slowHold + time.Second)
	if _, ok := s.TryAcquire("manifest", "a", "m3", nil); ok {
		t.Fatal("a runtime with a reconcile held past slowHold borrowed a worker")
	}
	// The hung reconcile ends by its timeout: slow, no new proof, and the
	// old proof runs out.
	hung()
	*now = now.Add(proofWindow)
	if _, ok := s.TryAcquire("manifest", "a", "m3", nil); !ok {
		t.Fatal("under its cap the runtime gets its slot")
	}
	if _, ok := s.TryAcquire("manifest", "a", "m4", nil); ok {
		t.Fatal("a runtime whose only recent reconciles were slow borrowed a worker")
	}
}

// TestSlotsDoNotLendWhileAnotherRuntimeWaits: a runtime turned away at its
// cap stops lending to every other runtime until it has come back.
func TestSlotsDoNotLendWhileAnotherRuntimeWaits(t *testing.T) {
	s, now := clockedSlots(1)
	s.Workers("manifest", 16)
	acquire(t, s, "manifest", "a", "a0")()
	acquire(t, s, "manifest", "a", "a1")
	acquire(t, s, "manifest", "b", "b0")
	if _, ok := s.TryAcquire("manifest", "b", "b1", func() {}); ok {
		t.Fatal("b is at its cap and has no proof: it must wait")
	}
	if _, ok := s.TryAcquire("manifest", "a", "a2", nil); ok {
		t.Fatal("a borrowed a worker while b waited for a slot")
	}
	// b's reconcile comes back by itself within RetryAfter; one that did
	// not come back in waiterTTL is no longer waiting.
	*now = now.Add(waiterTTL + time.Millisecond)
	acquire(t, s, "manifest", "a", "a2")
}

// TestSlotsWakeWaitersWhenASlotFrees: a reconcile turned away is woken by
// the next slot its runtime frees, not by its retry; when the runtime may
// borrow, every waiter is woken at once, else the longest waiting.
func TestSlotsWakeWaitersWhenASlotFrees(t *testing.T) {
	s, now := clockedSlots(1)
	s.Workers("manifest", 16)
	woken := map[string]int{}
	wake := func(who string) func() { return func() { woken[who]++ } }

	held := acquire(t, s, "manifest", "a", "a0")
	for _, who := range []string{"a1", "a2", "a3"} {
		*now = now.Add(time.Millisecond)
		if _, ok := s.TryAcquire("manifest", "a", who, wake(who)); ok {
			t.Fatalf("%s got a slot at the cap without proof", who)
		}
	}
	// Another runtime's release wakes nobody of a.
	acquire(t, s, "manifest", "b", "b0")()
	if len(woken) != 0 {
		t.Fatalf("b's release woke %v", woken)
	}
	*now = now.Add(slowHold + time.Second)
	held() // slow: no proof, so only the longest waiting is woken
	if len(woken) != 1 || woken["a1"] != 1 {
		t.Fatalf("woken %v, want a1 alone", woken)
	}
	acquire(t, s, "manifest", "a", "a1")() // fast: proof now
	for _, who := range []string{"a2", "a3"} {
		if woken[who] != 1 {
			t.Fatalf("%s was not woken when the runtime could borrow (woken %v)", who, woken)
		}
	}
	// Each is woken once: a release with nobody waiting wakes nothing.
	acquire(t, s, "manifest", "a", "a2")()
	if woken["a2"] != 1 || woken["a3"] != 1 || woken["a1"] != 1 {
		t.Fatalf("a waiter was woken twice: %v", woken)
	}
}

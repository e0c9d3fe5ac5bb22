package remote

import "testing"

func TestSlotsCapEachRuntimeApart(t *testing.T) {
	s := NewSlots(2)
	r1, ok1 := s.TryAcquire("manifest", "a")
	_, ok2 := s.TryAcquire("kyma", "a")
	if !ok1 || !ok2 {
		t.Fatal("the first two reconciles of a runtime must get a slot")
	}
	if _, ok := s.TryAcquire("manifest", "a"); ok {
		t.Fatal("a third reconcile of the same runtime got a slot, across controllers the cap is 2")
	}
	if _, ok := s.TryAcquire("manifest", "b"); !ok {
		t.Fatal("another runtime must not be limited by a busy one")
	}
	r1()
	r1() // releasing twice frees one slot, not two
	if _, ok := s.TryAcquire("manifest", "a"); !ok {
		t.Fatal("a released slot is free again")
	}
	if _, ok := s.TryAcquire("manifest", "a"); ok {
		t.Fatal("a double release freed a second slot")
	}
}

func TestSlotsWithoutCap(t *testing.T) {
	for _, s := range []*Slots{NewSlots(0), nil} {
		for range 100 {
			if _, ok := s.TryAcquire("manifest", "a"); !ok {
				t.Fatal("no cap means every reconcile gets a slot")
			}
		}
	}
}

func TestRetryAfterIsShortAndJittered(t *testing.T) {
	for range 100 {
		if d := RetryAfter(); d < SlotRetryDelay || d >= SlotRetryDelay*3/2 {
			t.Fatalf("RetryAfter %s outside [%s, %s)", d, SlotRetryDelay, SlotRetryDelay*3/2)
		}
	}
}

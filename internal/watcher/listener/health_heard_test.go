package listener

import (
	"testing"
	"time"
)

// TestHeardNeedsContact: a runtime counts as reporting only after contact
// within the timeout; the start-up grace that keeps !Silent true does not
// make it Heard.
func TestHeardNeedsContact(t *testing.T) {
	h := NewHealth(time.Minute)
	now := time.Now()
	if h.Silent("r1", now) {
		t.Fatal("a runtime not heard from yet is not silent during the grace")
	}
	if h.Heard("r1", now) {
		t.Fatal("a runtime never heard from is Heard")
	}
	h.Seen("r1", now)
	if !h.Heard("r1", now.Add(time.Minute)) {
		t.Fatal("contact within the timeout is not Heard")
	}
	if h.Heard("r1", now.Add(time.Minute+time.Second)) {
		t.Fatal("contact older than the timeout is Heard")
	}
}

// TestSeenTellsTransitions: Seen answers false exactly when contact ends a
// silence or is the first, the moments the Kyma's WatcherReporting condition
// changes; forget undoes a contact whose transition could not be handed on.
func TestSeenTellsTransitions(t *testing.T) {
	h := NewHealth(time.Minute)
	now := time.Now()
	steps := []struct {
		name     string
		at       time.Time
		wasHeard bool
	}{
		{"first contact", now, false},
		{"heartbeat within the timeout", now.Add(30 * time.Second), true},
		{"another", now.Add(80 * time.Second), true},
		{"after a silence", now.Add(3 * time.Minute), false},
	}
	for _, s := range steps {
		if got := h.Seen("r1", s.at); got != s.wasHeard {
			t.Fatalf("%s: Seen = %v, want %v", s.name, got, s.wasHeard)
		}
	}
	h.forget("r1", now.Add(3*time.Minute))
	if h.Seen("r1", now.Add(3*time.Minute+time.Second)) {
		t.Fatal("a forgotten contact still counts: the transition is lost")
	}
	var nilHealth *Health
	if !nilHealth.Seen("r1", now) {
		t.Fatal("a nil Health reports transitions")
	}
}

// TestKeepOnlyKeepsRuntimesStillHeard: a runtime no longer watched (its
// reporting paused) whose agent still sends heartbeats stays known, so that
// its heartbeats are no transitions; one silent past the timeout is
// forgotten.
func TestKeepOnlyKeepsRuntimesStillHeard(t *testing.T) {
	h := NewHealth(time.Minute)
	now := time.Now()
	h.Seen("paused", now)
	h.Seen("gone", now.Add(-2*time.Minute))
	h.keepOnly(map[string]bool{}, now.Add(time.Second))
	if !h.Seen("paused", now.Add(2*time.Second)) {
		t.Fatal("a heartbeat of a paused runtime still heard counts as a transition")
	}
	h.mu.Lock()
	_, kept := h.seen["gone"]
	h.mu.Unlock()
	if kept {
		t.Fatal("a runtime neither watched nor heard is kept")
	}
}

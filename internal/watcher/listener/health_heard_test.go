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

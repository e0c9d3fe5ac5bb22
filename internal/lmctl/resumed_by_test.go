package lmctl

import (
	"strings"
	"testing"
	"time"
)

// What lmctl rollout resume records says when and why, and fits the
// field (256 characters) whatever the reason's length.
func TestResumedBySaysWhenAndWhy(t *testing.T) {
	at := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	by := resumedBy("canary fixed", at)
	if !strings.Contains(by, "at 2026-12-03T17:00:00Z (lmctl rollout resume): canary fixed") {
		t.Errorf("got %q", by)
	}
	if long := resumedBy(strings.Repeat("x", 400), at); len(long) != 256 {
		t.Errorf("a long reason gives %d characters, want 256", len(long))
	}
}

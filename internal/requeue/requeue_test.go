package requeue_test

import (
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

func TestAfterPicksIntervalByStateWithinJitter(t *testing.T) {
	intervals := requeue.Intervals{Ready: 100 * time.Second, Processing: time.Second, Error: 10 * time.Second, Warning: 20 * time.Second, Jitter: 0.5}
	tests := []struct {
		state v1beta2.State
		base  time.Duration
	}{
		{v1beta2.StateReady, 100 * time.Second},
		{v1beta2.StateUnmanaged, 100 * time.Second},
		{v1beta2.StateProcessing, time.Second},
		{v1beta2.StateDeleting, time.Second},
		{v1beta2.StateError, 10 * time.Second},
		{v1beta2.StateWarning, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 50 {
				got := intervals.After(tt.state)
				if got < tt.base || got >= tt.base+tt.base/2 {
					t.Fatalf("After(%s) = %s, want in [%s, %s)", tt.state, got, tt.base, tt.base+tt.base/2)
				}
				seen[got] = true
			}
			if len(seen) < 2 {
				t.Fatalf("After(%s) returned the same value 50 times: no jitter", tt.state)
			}
		})
	}
}

func TestJitterZeroFactorIsExact(t *testing.T) {
	if got := requeue.Jitter(time.Minute, 0); got != time.Minute {
		t.Fatalf("Jitter(1m, 0) = %s", got)
	}
}

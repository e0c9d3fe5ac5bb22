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

func TestAlignedPutsAGroupOnItsOwnMoments(t *testing.T) {
	const interval = 5 * time.Minute
	start := time.Unix(1_700_000_000, 123)
	moment := func(group string, now time.Time) time.Time { return now.Add(requeue.Aligned(interval, group, now)) }
	for i := range 50 {
		now := start.Add(time.Duration(i) * 7 * time.Second)
		wait := requeue.Aligned(interval, "kyma-a", now)
		if wait < interval/2 || wait >= interval*3/2 {
			t.Fatalf("Aligned at +%v = %v, want in [%v, %v)", now.Sub(start), wait, interval/2, interval*3/2)
		}
	}
	// Manifests of one Kyma that finished seconds apart are next checked
	// at the same moment; a check at that moment waits one interval.
	first := moment("kyma-a", start)
	if other := moment("kyma-a", start.Add(3*time.Second)); !other.Equal(first) && !other.Equal(first.Add(interval)) {
		t.Errorf("checks 3s apart are due at %v and %v; want the same moment", first, other)
	}
	if next := moment("kyma-a", first); !next.Equal(first.Add(interval)) {
		t.Errorf("a check at its moment is due again after %v, want %v", next.Sub(first), interval)
	}
	// Different Kymas spread over the interval.
	phases := map[time.Duration]bool{}
	for _, group := range []string{"kyma-a", "kyma-b", "kyma-c", "kyma-d"} {
		phases[time.Duration(moment(group, start).UnixNano()%int64(interval))] = true
	}
	if len(phases) < 4 {
		t.Errorf("four Kymas share %d phases, want 4", len(phases))
	}
}

func TestSpreadIsAStableOffsetWithinItsWidth(t *testing.T) {
	offsets := map[time.Duration]bool{}
	for _, member := range []string{"k-alpha", "k-bravo", "k-charlie", "k-delta", "k-echo"} {
		d := requeue.Spread(member, 5*time.Second)
		if d < 0 || d >= 5*time.Second {
			t.Fatalf("Spread(%s) = %v, want in [0, 5s)", member, d)
		}
		if requeue.Spread(member, 5*time.Second) != d {
			t.Fatalf("Spread(%s) is not stable", member)
		}
		offsets[d] = true
	}
	if len(offsets) < 5 {
		t.Errorf("five members share %d offsets, want 5", len(offsets))
	}
}

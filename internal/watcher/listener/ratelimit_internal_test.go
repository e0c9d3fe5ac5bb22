package listener

import (
	"testing"
	"time"
)

func TestRuntimeLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newRuntimeLimiter(2, 3) // 2 per second, bursts of 3

	// A runtime gets its burst, then waits for the refill.
	for i := range 3 {
		if ok, _ := l.allow("a", t0); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := l.allow("a", t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over the burst: allowed %v, wait %s; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.allow("a", t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the refill of one token")
	}
	// Another runtime is not affected.
	if ok, _ := l.allow("b", t0); !ok {
		t.Fatal("runtime b refused because of runtime a")
	}

	// A bucket that refilled completely is forgotten at the next sweep; one
	// still short of tokens is kept, so a flooding runtime cannot escape its
	// limit by waiting for a sweep.
	for range 3 {
		l.allow("c", t0.Add(sweepEvery))
	}
	l.allow("d", t0.Add(sweepEvery)) // sweeps: a and b are full again
	if got := l.size(); got != 2 {
		t.Fatalf("%d buckets after the sweep, want 2 (c and d)", got)
	}
	if ok, _ := l.allow("c", t0.Add(sweepEvery)); ok {
		t.Fatal("runtime c's empty bucket was forgotten")
	}
	l.allow("e", t0.Add(2*sweepEvery))
	if got := l.size(); got != 1 {
		t.Fatalf("%d buckets after every other runtime went quiet, want 1", got)
	}
}

func TestRuntimeLimiterOff(t *testing.T) {
	for _, perSecond := range []float64{0, -1} {
		l := newRuntimeLimiter(perSecond, 1)
		for range 100 {
			if ok, _ := l.allow("a", time.Now()); !ok {
				t.Fatalf("rate %g: refused although the limit is off", perSecond)
			}
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for wait, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 10 * time.Second: 10} {
		if got := retryAfterSeconds(wait); got != want {
			t.Errorf("retryAfterSeconds(%s) = %d, want %d", wait, got, want)
		}
	}
}

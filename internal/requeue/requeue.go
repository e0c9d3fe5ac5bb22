// Package requeue decides when an object is looked at again, by its state,
// with random jitter so that a fleet of objects that changed together does
// not come back together.
package requeue

import (
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Intervals are the requeue intervals per state.
type Intervals struct {
	// Ready is how often a healthy object is checked for drift.
	Ready time.Duration
	// Processing is how soon an object on its way to Ready is looked at again.
	Processing time.Duration
	// Error is how soon an object in Error is retried when the error is not
	// returned to the work queue's backoff.
	Error time.Duration
	// Warning is how soon an object in Warning is looked at again.
	Warning time.Duration
	// Jitter is the fraction (0..1) by which each interval is randomly
	// lengthened.
	Jitter float64
}

// DefaultIntervals suit a large fleet: drift is corrected within minutes,
// installs are followed closely.
func DefaultIntervals() Intervals {
	return Intervals{
		Ready:      5 * time.Minute,
		Processing: 2 * time.Second,
		Error:      30 * time.Second,
		Warning:    30 * time.Second,
		Jitter:     0.2,
	}
}

// After returns the jittered interval for the state.
func (i Intervals) After(state v1beta2.State) time.Duration {
	var base time.Duration
	switch state {
	case v1beta2.StateReady, v1beta2.StateUnmanaged:
		base = i.Ready
	case v1beta2.StateError:
		base = i.Error
	case v1beta2.StateWarning:
		base = i.Warning
	default:
		base = i.Processing
	}
	return Jitter(base, i.Jitter)
}

// Jitter lengthens d by a random fraction in [0, factor).
func Jitter(d time.Duration, factor float64) time.Duration {
	if factor <= 0 || d <= 0 {
		return d
	}
	return d + time.Duration(rand.Float64()*factor*float64(d)) //nolint:gosec // jitter needs no cryptographic randomness
}

// Aligned returns how long from now until the next check of a group of
// objects (a Kyma's Manifests) that is checked every interval, at a phase
// of its own: the checks of one group fall on the same moments, so that
// they can share their reads (internal/drift.Listings), while the phases of
// different groups spread the fleet's checks over the interval as jitter
// does. The wait is at least half an interval and less than one and a half;
// a group checked at each of its moments waits exactly one interval.
func Aligned(interval time.Duration, group string, now time.Time) time.Duration {
	if interval <= 0 {
		return interval
	}
	phase := int64(hashOf(group) % uint64(interval))
	earliest := now.Add(interval / 2).UnixNano()
	// The first moment phase + k*interval at or after earliest.
	k := (earliest - phase + int64(interval) - 1) / int64(interval)
	return time.Unix(0, phase+k*int64(interval)).Sub(now)
}

// Spread is a fixed offset in [0, width) for one member of a group (a
// Manifest of a Kyma), from a hash of its name: added to Aligned, it keeps a
// group's checks within width of each other, but not all at the same
// instant, where they would compete for the runtime's worker slots.
func Spread(member string, width time.Duration) time.Duration {
	if width <= 0 {
		return 0
	}
	return time.Duration(hashOf(member) % uint64(width))
}

func hashOf(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

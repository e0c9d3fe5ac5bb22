// Package requeue decides when an object is looked at again, by its state,
// with random jitter so that a fleet of objects that changed together does
// not come back together.
package requeue

import (
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

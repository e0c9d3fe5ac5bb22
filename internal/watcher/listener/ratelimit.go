package listener

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// sweepEvery is how often the limiter looks for buckets to forget, at most.
const sweepEvery = time.Minute

// runtimeLimiter gives each runtime identity (the client certificate's
// runtime id) a token bucket of its own, so that a runtime that floods the
// listener — its agent's client key is readable inside the runtime — is
// answered 429 while every other runtime's reports keep flowing.
//
// Memory stays bounded: a bucket that has refilled completely is the same as
// a new one, so it is forgotten at the next sweep; what remains are the
// runtimes that reported within the last burst/rate plus one sweep period.
// Runtime ids come only from certificates the watcher CA issued, so even
// that set is bounded by the fleet.
type runtimeLimiter struct {
	rate  rate.Limit
	burst int

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

// newRuntimeLimiter returns a limiter of perSecond reports per runtime with
// bursts of burst; nil (no limit) when perSecond is not positive.
func newRuntimeLimiter(perSecond float64, burst int) *runtimeLimiter {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	return &runtimeLimiter{rate: rate.Limit(perSecond), burst: burst, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token from runtimeID's bucket at now. When there is none it
// returns false and how long until there is one. It is safe on a nil
// limiter, which allows everything.
func (l *runtimeLimiter) allow(runtimeID string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	bucket, ok := l.buckets[runtimeID]
	if !ok {
		bucket = rate.NewLimiter(l.rate, l.burst)
		l.buckets[runtimeID] = bucket
		metrics.ListenerRateLimitBuckets.Set(float64(len(l.buckets)))
	}
	if bucket.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - bucket.TokensAt(now)
	return false, time.Duration(math.Ceil(missing / float64(l.rate) * float64(time.Second)))
}

// sweep forgets the buckets that are full again, once per sweepEvery.
func (l *runtimeLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < sweepEvery {
		return
	}
	l.lastSweep = now
	for id, bucket := range l.buckets {
		if bucket.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, id)
		}
	}
	metrics.ListenerRateLimitBuckets.Set(float64(len(l.buckets)))
}

// size is the number of buckets held.
func (l *runtimeLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

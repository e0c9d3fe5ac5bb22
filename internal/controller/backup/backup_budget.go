package backup

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// How many backups run at once follows the fleet, not a constant: by
// Little's law the backups in flight are, on average, the rate at which
// they fall due times how long one takes. The jitter spreads each
// schedule's runtimes evenly over its gaps, so the rate is the sum over the
// runtimes of one per shortest gap of their schedule (the densest part of
// it); the duration is what backups took lately. The budget allows twice
// that, so that a round finishes in about half its period and failed
// backups have time to be retried, and never more than the configured
// maximum (--backup-max-concurrency), which bounds the load on the
// registries and on the control plane. docs/operations.md, "Backups and
// restore", works the numbers for 5,000 hourly runtimes.

// DefaultMaxConcurrency is --backup-max-concurrency's default: at the
// assumed duration, 16 backups at once take 5,760 per hour.
const DefaultMaxConcurrency = 16

const (
	// headroom is how many times the average need the budget allows.
	headroom = 2
	// assumedDuration is a backup's duration before any was measured: on
	// the long side, so that a fresh operator starts with more parallel
	// backups rather than too few.
	assumedDuration = 10 * time.Second
	// durationWeight is the weight of the newest backup in the moving
	// average of durations: about the last ten count.
	durationWeight = 0.1
	// budgetRetryDelay is how soon a due backup that found the budget
	// spent looks again; jittered like remote.RetryAfter.
	budgetRetryDelay = time.Second
)

// parallelBackups is how many backups the budget lets run at once: perSecond
// backups falling due, each taking duration, with headroom, between 1 and
// most.
func parallelBackups(perSecond float64, duration time.Duration, most int) int {
	need := math.Ceil(perSecond * duration.Seconds() * headroom)
	if math.IsNaN(need) || need < 1 {
		need = 1
	}
	return int(min(need, float64(max(most, 1))))
}

// budget admits backups up to the current parallelBackups. One per
// operator process (shard): it plans for the runtimes this process backs
// up.
type budget struct {
	most int

	mu sync.Mutex
	// gaps are the shortest gap between firings of each runtime's
	// schedule, by Kyma; perSecond sums their inverses.
	gaps      map[string]time.Duration
	perSecond float64
	duration  time.Duration
	inFlight  int
}

func newBudget(most int) *budget {
	return &budget{most: max(most, 1), gaps: map[string]time.Duration{}, duration: assumedDuration}
}

// plan counts the Kyma as backed up on a schedule whose shortest gap
// between firings is gap; zero forgets it. A nil budget (a Reconciler not
// set up with a manager) plans nothing.
func (b *budget) plan(kyma string, gap time.Duration) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.gaps[kyma]; ok {
		if old == gap {
			return
		}
		b.perSecond -= 1 / old.Seconds()
		delete(b.gaps, kyma)
	}
	if gap > 0 {
		b.gaps[kyma] = gap
		b.perSecond += 1 / gap.Seconds()
	}
	if len(b.gaps) == 0 {
		b.perSecond = 0 // no rounding left behind
	}
	metrics.BackupParallelLimit.Set(float64(b.limitLocked()))
}

func (b *budget) limitLocked() int { return parallelBackups(b.perSecond, b.duration, b.most) }

// limit is how many backups may run at once now.
func (b *budget) limit() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limitLocked()
}

// tryAcquire admits one backup, or says false when the budget is spent;
// release must be called when the backup ends. A backup's duration is the
// real time it took (time.Now, not the operator's clock, which a test may
// hold still): the budget is about real work. A nil budget admits all.
func (b *budget) tryAcquire() (release func(), ok bool) {
	if b == nil {
		return func() {}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight >= b.limitLocked() {
		return nil, false
	}
	b.inFlight++
	metrics.BackupsInFlight.Set(float64(b.inFlight))
	start := time.Now()
	var once sync.Once
	return func() { once.Do(func() { b.done(time.Since(start)) }) }, true
}

func (b *budget) done(took time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	b.duration = time.Duration(durationWeight*float64(took) + (1-durationWeight)*float64(b.duration))
	metrics.BackupsInFlight.Set(float64(b.inFlight))
	metrics.BackupParallelLimit.Set(float64(b.limitLocked()))
	metrics.BackupDuration.Observe(took.Seconds())
}

// budgetRetryAfter is when a due backup that found the budget spent comes
// back: budgetRetryDelay plus up to half of it again, so that the waiting
// ones do not all come back at once.
func budgetRetryAfter() time.Duration {
	return budgetRetryDelay + rand.N(budgetRetryDelay/2) //nolint:gosec // jitter, not security
}

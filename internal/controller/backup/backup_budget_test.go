package backup

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParallelBackups(t *testing.T) {
	hourly5000 := 5000.0 / 3600
	for _, tt := range []struct {
		name      string
		perSecond float64
		duration  time.Duration
		most      int
		want      int
	}{
		{"5,000 hourly at 2 s: twice 2.8 in flight", hourly5000, 2 * time.Second, 16, 6},
		{"5,000 hourly at 10 s: the cap", hourly5000, 10 * time.Second, 16, 16},
		{"1,000 every 5 minutes at 1 s", 1000.0 / 300, time.Second, 16, 7},
		{"nothing due", 0, 2 * time.Second, 16, 1},
		{"a few daily", 10.0 / 86400, time.Minute, 16, 1},
		{"no cap given", hourly5000, 10 * time.Second, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(parallelBackups(tt.perSecond, tt.duration, tt.most)).To(Equal(tt.want))
		})
	}
}

// The design's promise (docs/operations.md): with the default cap, a round
// of 5,000 hourly backups finishes inside the hour for any backup duration
// up to 11.5 s, and in about half the hour while the cap is not reached.
func TestBudgetFinishesAnHourlyRoundOf5000(t *testing.T) {
	g := NewWithT(t)
	perSecond := 5000.0 / 3600
	for d := 500 * time.Millisecond; d <= 11500*time.Millisecond; d += 500 * time.Millisecond {
		n := parallelBackups(perSecond, d, DefaultMaxConcurrency)
		round := time.Duration(5000 / float64(n) * float64(d))
		g.Expect(round).To(BeNumerically("<=", time.Hour), "backups of %s, %d at once", d, n)
		if n < DefaultMaxConcurrency {
			g.Expect(round).To(BeNumerically("<=", 31*time.Minute), "backups of %s, %d at once", d, n)
		}
	}
}

// The budget follows the runtimes it plans for and the durations it
// measures, and admits no more than its limit.
func TestBudget(t *testing.T) {
	g := NewWithT(t)
	b := newBudget(16)
	g.Expect(b.limit()).To(Equal(1), "no runtime, no demand")
	for i := range 3600 {
		b.plan(fmt.Sprintf("kyma-%d", i), time.Hour) // one per second
	}
	g.Expect(b.limit()).To(Equal(16), "at the assumed 10 s: 20, capped")

	var releases []func()
	for range 16 {
		release, ok := b.tryAcquire()
		g.Expect(ok).To(BeTrue())
		releases = append(releases, release)
	}
	_, ok := b.tryAcquire()
	g.Expect(ok).To(BeFalse(), "the budget is spent")
	releases[0]()
	releases[0]() // twice is once
	release, ok := b.tryAcquire()
	g.Expect(ok).To(BeTrue(), "a slot came free")
	releases[0] = release
	for _, release := range releases {
		release()
	}

	// Backups turn out to take 1.4 s: 1 per second × 1.4 s × 2 = 2.8.
	for range 60 {
		_, ok := b.tryAcquire()
		g.Expect(ok).To(BeTrue())
		b.done(1400 * time.Millisecond)
	}
	g.Expect(b.limit()).To(Equal(3))

	// Half the runtimes move to a daily schedule, then are forgotten.
	for i := range 1800 {
		b.plan(fmt.Sprintf("kyma-%d", i), 24*time.Hour)
	}
	g.Expect(b.limit()).To(Equal(2))
	for i := range 3600 {
		b.plan(fmt.Sprintf("kyma-%d", i), 0)
	}
	g.Expect(b.perSecond).To(BeZero())
	g.Expect(b.limit()).To(Equal(1))
}

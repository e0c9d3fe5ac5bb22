package backup

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// schedule parses one schedule of the given cron expression and jitter
// (empty: left out).
func schedule(t *testing.T, expr, jitter string) *Schedule {
	t.Helper()
	j := ""
	if jitter != "" {
		j = ", jitter: " + jitter
	}
	s, err := Parse(fmt.Appendf(nil, "schedules:\n  - {name: s, schedule: '%s', repository: r.io/b, keySecret: k%s}\n", expr, j))
	if err != nil {
		t.Fatal(err)
	}
	return &s.Schedules[0]
}

var monday = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// A runtime's backup time lies inside the gap between the firing before it
// and the next firing, bounded by jitter, and does not depend on when it is
// asked: any time inside the gap before the backup gives the same answer.
func TestNextForStaysInsideItsGap(t *testing.T) {
	for _, tt := range []struct {
		name, expr, jitter string
		// firings are two consecutive firings after monday; spread bounds
		// the offset.
		from, to time.Time
		spread   time.Duration
	}{
		{"hourly, whole hour", "0 * * * *", "", monday.Add(time.Hour), monday.Add(2 * time.Hour), time.Hour},
		{"hourly, 10 minutes", "@hourly", "10m", monday.Add(time.Hour), monday.Add(2 * time.Hour), 10 * time.Minute},
		{"daily, whole day", "@daily", "", monday.AddDate(0, 0, 1), monday.AddDate(0, 0, 2), 24 * time.Hour},
		{"twice a day, short gap", "0 9,17 * * *", "", monday.Add(9 * time.Hour), monday.Add(17 * time.Hour), 8 * time.Hour},
		{"twice a day, long gap", "0 9,17 * * *", "", monday.Add(17 * time.Hour), monday.Add(33 * time.Hour), 16 * time.Hour},
		{"every 5 minutes, anchored", "@every 5m", "", monday.Add(10 * time.Minute), monday.Add(15 * time.Minute), 5 * time.Minute},
		{"no jitter", "0 * * * *", "0s", monday.Add(time.Hour), monday.Add(2 * time.Hour), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := schedule(t, tt.expr, tt.jitter)
			for i := range 200 {
				kyma := fmt.Sprintf("kyma-%d", i)
				at := s.NextFor(kyma, tt.from.Add(-time.Second))
				g.Expect(at).To(BeTemporally(">=", tt.from), kyma)
				g.Expect(at).To(BeTemporally("<", tt.to), kyma)
				g.Expect(at.Sub(tt.from)).To(BeNumerically("<=", tt.spread), kyma)
				g.Expect(at.Sub(tt.from)%time.Second).To(BeZero(), "whole seconds, as tags and status hold them")
				// Asked again later in the gap (a restart, another shard):
				// the same time.
				if at.After(tt.from) {
					g.Expect(s.NextFor(kyma, tt.from)).To(Equal(at))
				}
				g.Expect(s.NextFor(kyma, at.Add(-time.Second))).To(Equal(at))
				// Once it passed: the next gap's.
				after := s.NextFor(kyma, at)
				g.Expect(after).To(BeTemporally(">=", tt.to))
				g.Expect(after).To(BeTemporally("<", s.Next(tt.to)))
			}
		})
	}
}

// The fleet spreads evenly over the period: 1,000 runtimes on an hourly
// schedule fill each five-minute slice of the hour with about 83, and a
// runtime keeps its minute from hour to hour. The names are fixed, so the
// counts are too: this cannot flake.
func TestNextForSpreadsTheFleet(t *testing.T) {
	g := NewWithT(t)
	s := schedule(t, "0 * * * *", "")
	hour := monday.Add(10 * time.Hour)
	slices := make([]int, 12)
	for i := range 1000 {
		kyma := fmt.Sprintf("runtime-%04d", i)
		at := s.NextFor(kyma, hour.Add(-time.Second))
		slices[at.Sub(hour)/(5*time.Minute)]++
		g.Expect(s.NextFor(kyma, hour.Add(time.Hour-time.Second)).Sub(at)).To(Equal(time.Hour), "the same offset every hour")
	}
	for i, n := range slices {
		g.Expect(n).To(BeNumerically("~", 1000/12, 30), "slice %d of the hour: %v", i, slices)
	}
}

// @every counts from fixed points in time, not from when it is asked, so a
// late backup does not shift the ones after it.
func TestEveryIsAnchored(t *testing.T) {
	g := NewWithT(t)
	s := schedule(t, "@every 5m", "0s")
	g.Expect(s.Next(monday.Add(7*time.Minute + 13*time.Second))).To(Equal(monday.Add(10 * time.Minute)))
	g.Expect(s.NextFor("a", monday.Add(9*time.Minute))).To(Equal(monday.Add(10 * time.Minute)))
}

func TestIntervals(t *testing.T) {
	for _, tt := range []struct {
		expr              string
		shortest, longest time.Duration
	}{
		{"0 * * * *", time.Hour, time.Hour},
		{"@every 5m", 5 * time.Minute, 5 * time.Minute},
		{"0 9,17 * * *", 8 * time.Hour, 16 * time.Hour},
		{"0 9 * * 1-5", 24 * time.Hour, 72 * time.Hour},
		{"0 0 1 * *", 28 * 24 * time.Hour, 31 * 24 * time.Hour},
	} {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := schedule(t, tt.expr, "").measureIntervals(monday)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(got).To(Equal(Intervals{Shortest: tt.shortest, Longest: tt.longest}))
		})
	}
}

// Retention works on the times backups were taken: jittered hourly backups
// fall one into each hour, so the hourly count keeps exactly that many.
func TestRetentionKeepsJitteredHourlyBackups(t *testing.T) {
	g := NewWithT(t)
	s := schedule(t, "0 * * * *", "")
	for _, kyma := range []string{"a", "b", "c", "d"} {
		var times []time.Time
		for at := s.NextFor(kyma, monday); at.Before(monday.Add(48 * time.Hour)); at = s.NextFor(kyma, at) {
			times = append(times, at)
		}
		g.Expect(times).To(HaveLen(48))
		now := times[len(times)-1]
		g.Expect(Keep(times, now, Retention{Hourly: 24}, time.UTC)).To(Equal(times[24:]), kyma)
		g.Expect(Drop(times, now, Retention{Hourly: 24}, time.UTC)).To(Equal(times[:24]), kyma)
	}
}

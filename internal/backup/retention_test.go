package backup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func at(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

func hourly(from time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = from.Add(time.Duration(i) * time.Hour)
	}
	return out
}

func TestKeep(t *testing.T) {
	// 2026-03-02 is a Monday.
	fiveWeeks := hourly(at("2026-03-02 00:00"), 5*7*24) // up to Sun 2026-04-05 23:00
	now := at("2026-04-05 23:30")
	tests := []struct {
		name  string
		times []time.Time
		now   time.Time
		r     Retention
		loc   *time.Location
		want  []time.Time
	}{
		{
			name: "nothing", now: now, r: DefaultRetention(),
		},
		{
			name:  "five weeks hourly: 24 hours, then the last of each day, then of each week",
			times: fiveWeeks, now: now, r: DefaultRetention(),
			want: append([]time.Time{
				at("2026-03-15 23:00"), // the week of Mar 9 is the 4th back: its last
				at("2026-03-22 23:00"), // week of Mar 16
				at("2026-03-29 23:00"), // week of Mar 23 (the 7 days are Mar 30 to Apr 5)
				at("2026-03-30 23:00"), at("2026-03-31 23:00"), at("2026-04-01 23:00"),
				at("2026-04-02 23:00"), at("2026-04-03 23:00"), at("2026-04-04 23:00"),
			}, hourly(at("2026-04-05 00:00"), 24)...),
		},
		{
			name: "counts of 0 keep only the newest", times: fiveWeeks, now: now, r: Retention{},
			want: []time.Time{at("2026-04-05 23:00")},
		},
		{
			name:  "the newest is kept however old; a time after now is kept",
			times: []time.Time{at("2025-01-01 10:00"), at("2025-01-01 09:00"), at("2026-05-01 00:00")},
			now:   now, r: DefaultRetention(),
			want: []time.Time{at("2026-05-01 00:00")},
		},
		{
			name:  "two in one hour: the newer",
			times: []time.Time{at("2026-04-05 22:10"), at("2026-04-05 22:50"), at("2026-04-05 23:05")},
			now:   now, r: Retention{Hourly: 2},
			want: []time.Time{at("2026-04-05 22:50"), at("2026-04-05 23:05")},
		},
		{
			name:  "days are read in the schedule's time zone",
			times: []time.Time{at("2026-04-04 21:30"), at("2026-04-04 22:30")}, // 23:30 and 00:30 in Berlin (CEST)
			now:   at("2026-04-05 10:00"), r: Retention{Daily: 2}, loc: berlin(),
			want: []time.Time{at("2026-04-04 21:30"), at("2026-04-04 22:30")},
		},
		{
			name:  "in UTC the same two are one day",
			times: []time.Time{at("2026-04-04 21:30"), at("2026-04-04 22:30")},
			now:   at("2026-04-05 10:00"), r: Retention{Daily: 2},
			want: []time.Time{at("2026-04-04 22:30")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Keep(tt.times, tt.now, tt.r, tt.loc)
			g.Expect(got).To(HaveLen(len(tt.want)))
			for i := range tt.want {
				g.Expect(got[i]).To(BeTemporally("==", tt.want[i]), "kept[%d]", i)
			}
			g.Expect(len(Drop(tt.times, tt.now, tt.r, tt.loc)) + len(got)).To(Equal(len(tt.times)))
		})
	}
}

// With the default retention, hourly backups over any length of time leave
// at most 24 + 7 + 4 backups, and never fewer than 24 once a day has passed.
func TestKeepBounded(t *testing.T) {
	g := NewWithT(t)
	times := hourly(at("2026-01-01 00:00"), 100*24)
	for _, n := range []int{1, 24, 25, 24 * 7, 24 * 30, 100 * 24} {
		kept := Keep(times[:n], times[n-1], DefaultRetention(), time.UTC)
		g.Expect(len(kept)).To(BeNumerically("<=", 24+7+4), "after %d hours", n)
		g.Expect(len(kept)).To(BeNumerically(">=", min(n, 24)), "after %d hours", n)
	}
}

func berlin() *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	return loc
}

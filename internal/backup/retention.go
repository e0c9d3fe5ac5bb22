package backup

import (
	"slices"
	"time"
)

// Retention is how many backups grandfather-father-son thinning keeps: the
// newest backup of each of the last Hourly hours, Daily days and Weekly
// weeks (the current one included).
type Retention struct {
	Hourly int
	Daily  int
	Weekly int
}

// DefaultRetention keeps 24 hourly, 7 daily and 4 weekly backups.
func DefaultRetention() Retention {
	return Retention{Hourly: DefaultHourly, Daily: DefaultDaily, Weekly: DefaultWeekly}
}

// Keep says which of the backups taken at times to keep at now: the newest
// in each of the r.Hourly hours, r.Daily calendar days and r.Weekly ISO
// weeks (Monday to Sunday) up to now, days and weeks read in loc. The
// windows count back from now, not from the newest backup, so that what is
// kept does not depend on how often the operator ran; the newest backup is
// always kept, however old, so that a runtime whose backups stopped (its
// operator was down, it is deleted and in its grace period) keeps its last
// one. A time after now (a clock set back) is kept: it cannot be placed.
// The answer is in the order of times.
func Keep(times []time.Time, now time.Time, r Retention, loc *time.Location) []time.Time {
	if loc == nil {
		loc = time.UTC
	}
	now = now.In(loc)
	keep := make(map[int]bool, len(times))
	newest := -1
	for i, t := range times {
		if newest < 0 || t.After(times[newest]) {
			newest = i
		}
		if t.After(now) {
			keep[i] = true
		}
	}
	if newest >= 0 {
		keep[newest] = true
	}
	for _, g := range []struct {
		n      int
		bucket func(t time.Time) int // how many periods before now's
	}{
		{r.Hourly, func(t time.Time) int { return int(now.Truncate(time.Hour).Sub(t.Truncate(time.Hour)) / time.Hour) }},
		{r.Daily, func(t time.Time) int { return daysBetween(t.In(loc), now) }},
		{r.Weekly, func(t time.Time) int { return daysBetween(weekStart(t.In(loc)), weekStart(now)) / 7 }},
	} {
		best := map[int]int{} // bucket → index of its newest backup
		for i, t := range times {
			if t.After(now) {
				continue
			}
			b := g.bucket(t)
			if b < 0 || b >= g.n {
				continue
			}
			if j, ok := best[b]; !ok || t.After(times[j]) {
				best[b] = i
			}
		}
		for _, i := range best {
			keep[i] = true
		}
	}
	var out []time.Time
	for i, t := range times {
		if keep[i] {
			out = append(out, t)
		}
	}
	return out
}

// Drop is what Keep does not keep, in the order of times.
func Drop(times []time.Time, now time.Time, r Retention, loc *time.Location) []time.Time {
	kept := Keep(times, now, r, loc)
	var out []time.Time
	for _, t := range times {
		if !slices.ContainsFunc(kept, t.Equal) {
			out = append(out, t)
		}
	}
	return out
}

// daysBetween counts calendar days from a's date to b's, each read in its
// own location; a daylight-saving change does not shift it.
func daysBetween(a, b time.Time) int {
	da := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, time.UTC)
	db := time.Date(b.Year(), b.Month(), b.Day(), 0, 0, 0, 0, time.UTC)
	return int(db.Sub(da).Hours() / 24)
}

// weekStart is the Monday of t's ISO week, in t's location.
func weekStart(t time.Time) time.Time {
	offset := (int(t.Weekday()) + 6) % 7 // Monday 0 … Sunday 6
	return time.Date(t.Year(), t.Month(), t.Day()-offset, 0, 0, 0, 0, t.Location())
}

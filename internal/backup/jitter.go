package backup

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"

	"github.com/robfig/cron/v3"
)

// Spreading a fleet's backups (docs/operations.md, "Backups and restore").
// Every runtime a schedule selects would otherwise be due at the same cron
// minute: 5,000 snapshots, registry pushes and status writes at once, then
// nothing for the rest of the period. Each runtime's backup is instead
// moved into the gap between a firing and the next by a fraction of that
// gap read from a hash of its Kyma's name: the same in every process, shard
// and restart, different from runtime to runtime, and never past the next
// firing, so that a runtime still gets one backup per firing.

// grid is an @every schedule anchored to fixed points in time (multiples of
// its delay since the zero time) instead of to whenever it is asked: robfig's
// ConstantDelaySchedule answers "delay after t", which has no firings of its
// own to jitter between and drifts with every late backup.
type grid struct{ every time.Duration }

func (g grid) Next(t time.Time) time.Time { return t.Truncate(g.every).Add(g.every) }

// anchored is the schedule the operator uses for a parsed cron expression.
func anchored(s cron.Schedule) cron.Schedule {
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return grid{every: every.Delay}
	}
	return s
}

// maxLookback is how far back the firing before a time is looked for:
// robfig's cron looks five years ahead for the next, and a schedule that
// fires less often than that does not parse.
const maxLookback = 6 * 366 * 24 * time.Hour

// errNeverFires is a schedule with no firing in the years robfig's cron
// looks ahead (a 30th of February).
var errNeverFires = errors.New("it never fires: no time matches it in the next five years")

// jitterFraction is where in each gap between firings the Kyma's backups
// go, in [0, 1): a hash of its name under a label of its own, so that it is
// not correlated with the shard the name hashes to (internal/shard).
func jitterFraction(kyma string) float64 {
	sum := sha256.Sum256([]byte("lifecycle-manager/backup-jitter/" + kyma))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// offset is how far after a firing the Kyma's backup is, for a gap of gap
// to the next firing: its fraction of the gap, or of Jitter when that is
// shorter, in whole seconds (backup tags and status times have no finer
// grain), always before the next firing.
func (s *Schedule) offset(fraction float64, gap time.Duration) time.Duration {
	spread := gap
	if s.Jitter != nil && s.Jitter.Duration < spread {
		spread = s.Jitter.Duration
	}
	return time.Duration(fraction * float64(spread)).Truncate(time.Second)
}

// NextFor is the Kyma's first backup time after t: its schedule's firing
// moved by the Kyma's jitter. Zero when the schedule fires no more.
func (s *Schedule) NextFor(kyma string, t time.Time) time.Time {
	fraction := jitterFraction(kyma)
	// The firing at or before t may still have its jittered backup ahead.
	firing := s.firingAtOrBefore(t)
	if firing.IsZero() {
		firing = s.Next(t)
	}
	for !firing.IsZero() {
		next := s.Next(firing)
		if next.IsZero() {
			return time.Time{}
		}
		if at := firing.Add(s.offset(fraction, next.Sub(firing))); at.After(t) {
			return at
		}
		firing = next
	}
	return time.Time{}
}

// firingAtOrBefore is the schedule's last firing at or before t, zero when
// there is none in maxLookback. cron has no "previous": it looks back in
// doubling steps until a window holds a firing, then walks forward.
func (s *Schedule) firingAtOrBefore(t time.Time) time.Time {
	for back := time.Minute; back <= maxLookback; back *= 2 {
		firing := s.Next(t.Add(-back))
		if firing.IsZero() || firing.After(t) {
			continue
		}
		for {
			next := s.Next(firing)
			if next.IsZero() || next.After(t) {
				return firing
			}
			firing = next
		}
	}
	return time.Time{}
}

// Intervals are the shortest and the longest gap between two firings of a
// schedule. A runtime's backups are never further apart than the longest:
// each lies inside its own gap, at the same fraction of it. The fleet's
// backups are densest in the shortest.
type Intervals struct {
	Shortest, Longest time.Duration
}

// How far gaps are measured: a year holds every month, weekday and
// daylight-saving change; a few thousand firings bound a schedule that
// fires every minute.
const (
	intervalHorizon    = 366 * 24 * time.Hour
	intervalMaxFirings = 10000
)

// measureIntervals walks the firings from from over intervalHorizon (at
// least two of them).
func (s *Schedule) measureIntervals(from time.Time) (Intervals, error) {
	first := s.Next(from)
	if first.IsZero() {
		return Intervals{}, errNeverFires
	}
	var out Intervals
	for prev, n := first, 0; n < intervalMaxFirings; n++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		gap := next.Sub(prev)
		if out.Shortest == 0 || gap < out.Shortest {
			out.Shortest = gap
		}
		out.Longest = max(out.Longest, gap)
		if next.Sub(first) > intervalHorizon {
			break
		}
		prev = next
	}
	if out.Longest == 0 {
		return Intervals{}, errors.New("it fires only once: a backup schedule repeats")
	}
	return out, nil
}

// Intervals are the schedule's shortest and longest gaps between firings,
// measured when it was parsed.
func (s *Schedule) Intervals() Intervals { return s.intervals }

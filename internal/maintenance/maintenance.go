// Package maintenance holds the runtimes' maintenance windows (SPEC G2): a
// weekly policy per label group, from a file of the operator's
// (--maintenance-windows). A module version that requires downtime
// (ModuleTemplate spec.requiresDowntime) is applied to a runtime only
// inside its window, at a point in the window that is random per runtime
// but stable, so that a window's runtimes do not all start at its first
// second.
package maintenance

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // time zones named in the policy, on any base image

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/internal/labelgroup"
)

// Policy is the operator's maintenance windows. The first window whose
// selector matches a Kyma's labels is that runtime's.
type Policy struct {
	Windows []Window `json:"windows"`
}

// Window is a weekly maintenance window for a label group of Kymas.
type Window struct {
	// Group is the window's name, selector and time zone.
	labelgroup.Group `json:",inline"`
	// Days are the weekdays the window opens on: Mon, Tue, … Sun.
	Days []string `json:"days"`
	// Start is when it opens, "15:04" in the time zone.
	Start string `json:"start"`
	// Duration is how long it stays open, at most a day.
	Duration metav1.Duration `json:"duration"`

	days   map[time.Weekday]bool
	hour   int
	minute int
}

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// Load reads and checks a policy file; every mistake is named with the
// window it is in.
func Load(path string) (*Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading maintenance windows: %w", err)
	}
	return Parse(raw)
}

// Parse reads and checks a policy.
func Parse(raw []byte) (*Policy, error) {
	p := &Policy{}
	if err := yaml.UnmarshalStrict(raw, p); err != nil {
		return nil, fmt.Errorf("maintenance windows: %w", err)
	}
	var errs []error
	for i := range p.Windows {
		if err := p.Windows[i].compile(); err != nil {
			errs = append(errs, fmt.Errorf("maintenance window %d (%q): %w", i, p.Windows[i].Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func (w *Window) compile() error {
	if err := w.Compile(); err != nil { // the name, selector and time zone
		return err
	}
	if len(w.Days) == 0 {
		return errors.New("days is empty: name the weekdays it opens on (Mon … Sun)")
	}
	w.days = map[time.Weekday]bool{}
	for _, d := range w.Days {
		day, ok := weekdays[strings.ToLower(d)]
		if !ok {
			return fmt.Errorf("day %q: use Mon, Tue, Wed, Thu, Fri, Sat or Sun", d)
		}
		w.days[day] = true
	}
	start, err := time.Parse("15:04", w.Start)
	if err != nil {
		return fmt.Errorf("start %q: use hours and minutes, 15:04", w.Start)
	}
	w.hour, w.minute = start.Hour(), start.Minute()
	if w.Duration.Duration <= 0 || w.Duration.Duration > 24*time.Hour {
		return fmt.Errorf("duration %s: between 1m and 24h", w.Duration.Duration)
	}
	return nil
}

// Slot is when a runtime's upgrade that requires downtime may run.
type Slot struct {
	// Window is the runtime's window.
	Window string
	// At is the runtime's point in the window's current or next opening:
	// the upgrade runs from At until the window closes.
	At time.Time
	// Closes is when that opening ends.
	Closes time.Time
}

// Open tells whether now is inside the slot.
func (s Slot) Open(now time.Time) bool { return !now.Before(s.At) && now.Before(s.Closes) }

// SlotFor is the slot of a Kyma, by its name and labels; false when no
// window matches it.
func (p *Policy) SlotFor(kyma string, kymaLabels map[string]string, now time.Time) (Slot, bool) {
	for i := range p.Windows {
		w := &p.Windows[i]
		if w.Matches(kymaLabels) {
			return w.slot(kyma, now), true
		}
	}
	return Slot{}, false
}

// slot finds the opening that is current or next, and the runtime's point
// in it: a hash of the Kyma's name and the opening's date, spread over the
// first three quarters of the window so that an upgrade has time left.
func (w *Window) slot(kyma string, now time.Time) Slot {
	local := now.In(w.Location())
	// An opening may have started the day before and still be open.
	day := time.Date(local.Year(), local.Month(), local.Day()-1, w.hour, w.minute, 0, 0, w.Location())
	for range 9 {
		if w.days[day.Weekday()] {
			opens, closes := day, day.Add(w.Duration.Duration)
			if closes.After(now) {
				return Slot{Window: w.Name, At: opens.Add(offset(kyma, opens, w.Duration.Duration*3/4)), Closes: closes}
			}
		}
		day = time.Date(day.Year(), day.Month(), day.Day()+1, w.hour, w.minute, 0, 0, w.Location())
	}
	return Slot{Window: w.Name}
}

func offset(kyma string, opens time.Time, span time.Duration) time.Duration {
	if span <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(kyma + "/" + opens.Format("2006-01-02")))
	return time.Duration(h.Sum64()%uint64(span/time.Second)) * time.Second
}

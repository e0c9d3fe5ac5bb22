// Package hibernation pauses runtimes on a schedule (SPEC G3): a cron
// schedule per label group of Kymas says when a group goes to sleep and
// when it wakes, from a file of the operator's (--hibernation-schedules).
// A sleeping runtime is paused like one with the skip-reconciliation label:
// nothing is reconciled, nothing is written, deletion still runs; it
// resumes by itself at its wake time.
package hibernation

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	_ "time/tzdata" // time zones named in the schedules, on any base image

	"github.com/robfig/cron/v3"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/internal/labelgroup"
)

// Schedules are the operator's hibernation schedules; the first whose
// selector matches a Kyma is that runtime's.
type Schedules struct {
	Schedules []Schedule `json:"schedules"`
}

// Schedule puts a label group of Kymas to sleep and wakes it up.
type Schedule struct {
	// Group is the schedule's name, selector and time zone.
	labelgroup.Group `json:",inline"`
	// Hibernate is a cron expression (5 fields) of when the group goes to
	// sleep; Wake of when it wakes.
	Hibernate string `json:"hibernate"`
	Wake      string `json:"wake"`

	hibernate, wake cron.Schedule

	mu     sync.Mutex
	minute time.Time
	state  Sleep
	asleep bool
}

// Sleep is a runtime's hibernation.
type Sleep struct {
	// Schedule names the schedule.
	Schedule string
	// Until is when the runtime wakes.
	Until time.Time
}

// Load reads and checks a schedules file.
func Load(path string) (*Schedules, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading hibernation schedules: %w", err)
	}
	return Parse(raw)
}

// Parse reads and checks schedules; every mistake is named with its
// schedule.
func Parse(raw []byte) (*Schedules, error) {
	s := &Schedules{}
	if err := yaml.UnmarshalStrict(raw, s); err != nil {
		return nil, fmt.Errorf("hibernation schedules: %w", err)
	}
	var errs []error
	for i := range s.Schedules {
		if err := s.Schedules[i].compile(); err != nil {
			errs = append(errs, fmt.Errorf("hibernation schedule %d (%q): %w", i, s.Schedules[i].Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Schedule) compile() error {
	if err := s.Compile(); err != nil { // the name, selector and time zone
		return err
	}
	var err error
	if s.hibernate, err = labelgroup.Cron.Parse(s.Hibernate); err != nil {
		return fmt.Errorf("hibernate %q: %w", s.Hibernate, err)
	}
	if s.wake, err = labelgroup.Cron.Parse(s.Wake); err != nil {
		return fmt.Errorf("wake %q: %w", s.Wake, err)
	}
	// The state is found from the last firings within lookBack: both must
	// fire at least that often.
	for _, c := range []struct {
		field, expr string
		schedule    cron.Schedule
	}{{"hibernate", s.Hibernate, s.hibernate}, {"wake", s.Wake, s.wake}} {
		first := c.schedule.Next(time.Now().In(s.Location()))
		if second := c.schedule.Next(first); first.IsZero() || second.Sub(first) > lookBack {
			return fmt.Errorf("%s %q fires less often than every %s: use a weekly or more frequent schedule", c.field, c.expr, lookBack)
		}
	}
	return nil
}

// Asleep tells whether the Kyma's runtime sleeps now, and until when.
func (s *Schedules) Asleep(kymaLabels map[string]string, now time.Time) (Sleep, bool) {
	if s == nil {
		return Sleep{}, false
	}
	for i := range s.Schedules {
		sch := &s.Schedules[i]
		if sch.Matches(kymaLabels) {
			return sch.at(now)
		}
	}
	return Sleep{}, false
}

// lookBack is how far back the last firing of a schedule is looked for: a
// schedule that sleeps a group over a long weekend fires weekly.
const lookBack = 8 * 24 * time.Hour

// at is the schedule's state at now: asleep when it last fired hibernate
// after it last fired wake. The answer is the same for a whole minute,
// the schedules' resolution, and remembered for it.
func (s *Schedule) at(now time.Time) (Sleep, bool) {
	minute := now.Truncate(time.Minute)
	s.mu.Lock()
	defer s.mu.Unlock()
	if minute.Equal(s.minute) {
		return s.state, s.asleep
	}
	slept, woke := s.lastBefore(s.hibernate, now), s.lastBefore(s.wake, now)
	s.minute = minute
	s.asleep = !slept.IsZero() && slept.After(woke)
	s.state = Sleep{Schedule: s.Name, Until: s.wake.Next(now.In(s.Location()))}
	return s.state, s.asleep
}

// lastBefore is the schedule's last firing at or before now, within
// lookBack; zero when none.
func (s *Schedule) lastBefore(schedule cron.Schedule, now time.Time) time.Time {
	var last time.Time
	for t := schedule.Next(now.Add(-lookBack).In(s.Location())); !t.IsZero() && !t.After(now); t = schedule.Next(t) {
		last = t
	}
	return last
}

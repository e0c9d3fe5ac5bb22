// Package backup keeps what a runtime owner cannot get back from the
// control plane (SPEC G5): the runtime's Kyma and its modules' custom
// resources, as snapshots taken on a cron schedule per label group,
// encrypted with age to a key held in a Secret, stored as OCI artifacts
// (one per backup, tagged with its time) and thinned out grandfather-
// father-son style. It knows nothing of controllers: internal/controller/
// backup schedules it, internal/lmctl/backup restores from it.
package backup

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // time zones named in the schedules, on any base image

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/internal/labelgroup"
)

// Schedules are the operator's backup schedules (--backup-schedules); the
// first whose selector matches a Kyma is that runtime's. A Kyma no schedule
// matches is not backed up.
type Schedules struct {
	Schedules []Schedule `json:"schedules"`
}

// Schedule backs up a label group of runtimes.
type Schedule struct {
	// Group is the schedule's name, selector and time zone (read in it:
	// the schedule, and the retention's days and weeks).
	labelgroup.Group `json:",inline"`
	// Schedule is a cron expression (5 fields, or a descriptor such as
	// @hourly or @every 5m) of when a backup is taken. @every counts from
	// fixed points in time (multiples of its duration), not from the last
	// backup.
	Schedule string `json:"schedule"`
	// Jitter bounds how far after each firing a runtime's backup is moved
	// (jitter.go): each runtime by its own fraction of the gap to the next
	// firing, or of Jitter when that is shorter. Left out, the whole gap:
	// an hourly schedule spreads the fleet over the hour. 0 backs up every
	// runtime at the firing itself.
	Jitter *metav1.Duration `json:"jitter,omitempty"`
	// Retention says how many backups are kept; a count left out is its
	// default (24 hourly, 7 daily, 4 weekly), 0 keeps none of that kind.
	Retention RetentionSpec `json:"retention,omitzero"`
	// Repository is the OCI repository (host/path) the backups go to; each
	// runtime's are under <repository>/<kyma name>.
	Repository string `json:"repository"`
	// Recipients are age public keys (age1…) backups are encrypted to; any
	// one of their identities decrypts a backup. Public keys are not
	// secret, so they may stand here; changing them takes a restart.
	Recipients []string `json:"recipients,omitempty"`
	// KeySecret names a Secret in the operator's namespace whose key
	// "recipients" lists more recipients, one a line: read at every
	// backup, so that keys rotate without a restart. A Secret of an
	// operator before recipients, with the private key under "identity",
	// still works (its public part is used) with a warning.
	KeySecret string `json:"keySecret,omitempty"`
	// IncludeSecrets also backs up the Secrets that the backed-up custom
	// resources refer to in their own namespace (SecretReferences). Off
	// by default: a backup then holds no credentials of the runtime's,
	// only configuration.
	IncludeSecrets bool `json:"includeSecrets,omitempty"`

	cron       cron.Schedule
	retention  Retention
	recipients Recipients
	intervals  Intervals
}

// RetentionSpec is the retention as written; a count left out is its
// default.
type RetentionSpec struct {
	Hourly *int `json:"hourly,omitempty"`
	Daily  *int `json:"daily,omitempty"`
	Weekly *int `json:"weekly,omitempty"`
}

// Default retention: Gardener's etcd-backup-restore keeps as many.
const (
	DefaultHourly = 24
	DefaultDaily  = 7
	DefaultWeekly = 4
)

// Load reads and checks a schedules file.
func Load(path string) (*Schedules, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading backup schedules: %w", err)
	}
	return Parse(raw)
}

// Parse reads and checks schedules; every mistake is named with its
// schedule.
func Parse(raw []byte) (*Schedules, error) {
	s := &Schedules{}
	if err := yaml.UnmarshalStrict(raw, s); err != nil {
		return nil, fmt.Errorf("backup schedules: %w", err)
	}
	var errs []error
	names := map[string]bool{}
	for i := range s.Schedules {
		sch := &s.Schedules[i]
		if err := sch.compile(); err != nil {
			errs = append(errs, fmt.Errorf("backup schedule %d (%q): %w", i, sch.Name, err))
		}
		if names[sch.Name] {
			errs = append(errs, fmt.Errorf("backup schedule %d (%q): the name is used twice", i, sch.Name))
		}
		names[sch.Name] = true
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
	if s.cron, err = labelgroup.Cron.Parse(s.Schedule); err != nil {
		return fmt.Errorf("schedule %q: %w", s.Schedule, err)
	}
	s.cron = anchored(s.cron)
	if s.intervals, err = s.measureIntervals(time.Now()); err != nil {
		return fmt.Errorf("schedule %q: %w", s.Schedule, err)
	}
	if s.Jitter != nil && s.Jitter.Duration < 0 {
		return fmt.Errorf("jitter is %s: it cannot be negative (0 turns it off)", s.Jitter.Duration)
	}
	s.retention = DefaultRetention()
	for _, c := range []struct {
		field string
		from  *int
		to    *int
	}{{"hourly", s.Retention.Hourly, &s.retention.Hourly}, {"daily", s.Retention.Daily, &s.retention.Daily}, {"weekly", s.Retention.Weekly, &s.retention.Weekly}} {
		if c.from == nil {
			continue
		}
		if *c.from < 0 {
			return fmt.Errorf("retention.%s is %d: a count cannot be negative", c.field, *c.from)
		}
		*c.to = *c.from
	}
	if s.retention == (Retention{}) {
		return errors.New("retention keeps nothing: at least one of hourly, daily and weekly must be above 0")
	}
	if s.Repository == "" {
		return errors.New("repository is empty: name the OCI repository (host/path) the backups go to")
	}
	if _, err := name.NewRepository(s.Repository); err != nil {
		return fmt.Errorf("repository %q: %w", s.Repository, err)
	}
	if len(s.Recipients) == 0 && s.KeySecret == "" {
		return errors.New("no key: list the age public keys (age1…) backups are encrypted to under recipients, or name a Secret that lists them under keySecret")
	}
	s.recipients = Recipients{}
	for i, r := range s.Recipients {
		if err := s.recipients.add(strings.TrimSpace(r)); err != nil {
			return fmt.Errorf("recipients[%d]: %w", i, err)
		}
	}
	return nil
}

// InlineRecipients are the recipients the schedule lists itself.
func (s *Schedule) InlineRecipients() Recipients { return s.recipients }

// For is the schedule of a Kyma with the given labels, nil when none
// matches.
func (s *Schedules) For(kymaLabels map[string]string) *Schedule {
	if s == nil {
		return nil
	}
	for i := range s.Schedules {
		if s.Schedules[i].Matches(kymaLabels) {
			return &s.Schedules[i]
		}
	}
	return nil
}

// Next is the schedule's first firing after t, without jitter (NextFor
// has it).
func (s *Schedule) Next(t time.Time) time.Time {
	return s.cron.Next(t.In(s.Location()))
}

// Keep is the schedule's retention, defaults filled in.
func (s *Schedule) Keep() Retention { return s.retention }

// Package labelgroup is what the operator's policy files per label group
// share (maintenance windows, hibernation schedules, backup schedules):
// each entry has a name, picks Kymas by a label selector and reads its
// times in a time zone. The first entry whose selector matches a Kyma is
// that runtime's.
package labelgroup

import (
	"errors"
	"fmt"
	"time"
	_ "time/tzdata" // time zones named in the files, on any base image

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Group is an entry's name, selector and time zone. Embed it inline
// (`json:",inline"`) and call Compile before Matches and Location.
type Group struct {
	// Name names the entry in status and messages.
	Name string `json:"name"`
	// Selector picks the Kymas by label; absent, every Kyma.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// TimeZone is an IANA name; UTC when empty.
	TimeZone string `json:"timeZone,omitempty"`

	selector labels.Selector
	location *time.Location
}

// Compile checks the name, the selector and the time zone.
func (g *Group) Compile() error {
	if g.Name == "" {
		return errors.New("name is empty")
	}
	var err error
	g.selector = labels.Everything()
	if g.Selector != nil {
		if g.selector, err = metav1.LabelSelectorAsSelector(g.Selector); err != nil {
			return fmt.Errorf("selector: %w", err)
		}
	}
	if g.location, err = time.LoadLocation(g.TimeZone); err != nil {
		return fmt.Errorf("timeZone %q: %w", g.TimeZone, err)
	}
	return nil
}

// Matches tells whether the group picks a Kyma with these labels.
func (g *Group) Matches(kymaLabels map[string]string) bool {
	return g.selector != nil && g.selector.Matches(labels.Set(kymaLabels))
}

// Location is the group's time zone.
func (g *Group) Location() *time.Location { return g.location }

// Cron parses the schedules the files hold: five fields, or a descriptor
// such as @hourly.
var Cron = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

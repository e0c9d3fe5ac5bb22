// Package upgradepolicy holds the SREs' upgrade policies per label group
// of Kymas (issue 32, KLM epic #2678), from a file of the operator's
// (--upgrade-policies): whether a Kyma's modules upgrade at once or wait
// for the runtime owner's approval (upgrade: Manual), and how long such an
// upgrade may wait before it is installed without approval (forceAfter).
package upgradepolicy

import (
	"errors"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/labelgroup"
)

// DefaultForceAfter is how long a manual upgrade waits for approval when
// no policy names a deadline (--manual-upgrade-force-after).
const DefaultForceAfter = 30 * 24 * time.Hour

// Policy is the operator's upgrade policies. The first one whose selector
// matches a Kyma's labels is that runtime's.
type Policy struct {
	Policies []Entry `json:"policies"`
	// ForceAfter is the deadline of a manual upgrade when no entry
	// matches; DefaultForceAfter when zero.
	ForceAfter time.Duration `json:"-"`
}

// Entry is the upgrade policy of a label group of Kymas.
type Entry struct {
	// Group is the entry's name and selector; its time zone is not used.
	labelgroup.Group `json:",inline"`
	// Upgrade is the mode of the group's modules that set none.
	Upgrade v1beta2.UpgradeMode `json:"upgrade"`
	// ForceAfter is how long a manual upgrade waits for approval before it
	// is installed without it; more than zero: a manual upgrade always has
	// a deadline, so that no runtime keeps an unsupported version for ever.
	ForceAfter metav1.Duration `json:"forceAfter"`
}

// New is the operator's policy: the file at path (none when empty), and
// forceAfter for Kymas that no entry matches. A forceAfter of zero or less
// is refused: a manual upgrade always has a deadline.
func New(path string, forceAfter time.Duration) (*Policy, error) {
	if forceAfter <= 0 {
		return nil, fmt.Errorf("--manual-upgrade-force-after %s: must be more than zero: a manual upgrade always has a deadline", forceAfter)
	}
	p := &Policy{}
	if path != "" {
		var err error
		if p, err = Load(path); err != nil {
			return nil, err
		}
	}
	p.ForceAfter = forceAfter
	return p, nil
}

// Load reads and checks a policy file; every mistake is named with the
// entry it is in.
func Load(path string) (*Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading upgrade policies: %w", err)
	}
	return Parse(raw)
}

// Parse reads and checks a policy.
func Parse(raw []byte) (*Policy, error) {
	p := &Policy{}
	if err := yaml.UnmarshalStrict(raw, p); err != nil {
		return nil, fmt.Errorf("upgrade policies: %w", err)
	}
	var errs []error
	for i := range p.Policies {
		if err := p.Policies[i].compile(); err != nil {
			errs = append(errs, fmt.Errorf("upgrade policy %d (%q): %w", i, p.Policies[i].Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func (e *Entry) compile() error {
	if err := e.Compile(); err != nil { // the name and selector
		return err
	}
	if e.Upgrade != v1beta2.UpgradeAutomatic && e.Upgrade != v1beta2.UpgradeManual {
		return fmt.Errorf("upgrade %q: use Automatic or Manual", e.Upgrade)
	}
	if e.ForceAfter.Duration <= 0 {
		return fmt.Errorf("forceAfter %s: must be more than zero (for example 720h): a manual upgrade always has a deadline", e.ForceAfter.Duration)
	}
	return nil
}

// For is what applies to a Kyma with these labels: the mode of its modules
// that set none, and the deadline of a manual upgrade. A nil policy, or
// one with no matching entry, says Automatic and its ForceAfter.
func (p *Policy) For(kymaLabels map[string]string) (v1beta2.UpgradeMode, time.Duration) {
	if p == nil {
		return v1beta2.UpgradeAutomatic, DefaultForceAfter
	}
	for i := range p.Policies {
		if e := &p.Policies[i]; e.Matches(kymaLabels) {
			return e.Upgrade, e.ForceAfter.Duration
		}
	}
	if p.ForceAfter <= 0 {
		return v1beta2.UpgradeAutomatic, DefaultForceAfter
	}
	return v1beta2.UpgradeAutomatic, p.ForceAfter
}

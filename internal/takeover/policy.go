package takeover

import (
	"fmt"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Policy says which Kymas this operator takes over from KLM
// (--klm-takeover). Taking over is explicit: an operator started beside a
// KLM fleet by mistake must not move anything.
type Policy string

const (
	// Off takes over nothing: a module that KLM installed is reported
	// (KLMInstalled) and left as it is.
	Off Policy = "off"
	// Labelled takes over the Kymas labelled Label=true: a label group
	// at a time.
	Labelled Policy = "labelled"
	// All takes over every Kyma.
	All Policy = "all"
)

// Label marks a Kyma for the takeover under Labelled.
const Label = "operator.kyma-project.io/klm-takeover"

// ParsePolicy reads the flag's value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Off, Labelled, All:
		return p, nil
	case "":
		return Off, nil
	}
	return "", fmt.Errorf("--klm-takeover must be %s, %s or %s, not %q", Off, Labelled, All, s)
}

// Covers tells whether the Kyma is taken over. A nil Kyma (gone) is not.
func (p Policy) Covers(kyma *v1beta2.Kyma) bool {
	switch {
	case kyma == nil:
		return false
	case p == All:
		return true
	case p == Labelled:
		return kyma.Labels[Label] == "true"
	}
	return false
}

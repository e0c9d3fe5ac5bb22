// Package pause decides whether work on a runtime is paused (SPEC G3): by
// the skip-reconciliation label on its Kyma, or because the Kyma belongs to
// a label group the operator was told to pause.
package pause

import (
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Policy tells paused Kymas.
type Policy struct {
	// Group, when set, pauses every Kyma whose labels it matches.
	Group labels.Selector
}

// Paused reports whether no work may be done for the Kyma's runtime.
func (p Policy) Paused(kyma *v1beta2.Kyma) bool {
	if strings.EqualFold(kyma.Labels[v1beta2.SkipReconciliationLabel], "true") {
		return true
	}
	return p.Group != nil && !p.Group.Empty() && p.Group.Matches(labels.Set(kyma.Labels))
}

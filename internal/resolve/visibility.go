package resolve

import (
	"strings"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Restriction is what keeps a module version from some Kymas: a beta version
// is only for Kymas labelled beta, an internal one only for Kymas labelled
// internal. The zero value restricts nothing. Resolution and the catalog
// copied into runtimes share this one rule, so that a runtime is never shown
// a version its Kyma may not install.
type Restriction struct {
	Beta, Internal bool
}

// RestrictionOf reads a catalog object's restriction from its labels
// (v1beta2.BetaLabel, v1beta2.InternalLabel: "true" in any case) and, when
// meta is not nil, from the flags of the module's ModuleReleaseMeta, which
// restrict every version of the module.
func RestrictionOf(labels map[string]string, meta *v1beta2.ModuleReleaseMeta) Restriction {
	return Restriction{
		Beta:     labelTrue(labels, v1beta2.BetaLabel) || meta != nil && meta.Spec.Beta,
		Internal: labelTrue(labels, v1beta2.InternalLabel) || meta != nil && meta.Spec.Internal,
	}
}

// Unmet is the part of the restriction that a Kyma with kymaLabels is not
// labelled for; the zero Restriction when the Kyma may see the version.
func (r Restriction) Unmet(kymaLabels map[string]string) Restriction {
	return Restriction{
		Beta:     r.Beta && !labelTrue(kymaLabels, v1beta2.BetaLabel),
		Internal: r.Internal && !labelTrue(kymaLabels, v1beta2.InternalLabel),
	}
}

// VisibleTo reports whether a Kyma with kymaLabels may see a version with
// this restriction.
func (r Restriction) VisibleTo(kymaLabels map[string]string) bool {
	return r.Unmet(kymaLabels) == Restriction{}
}

// describe names the restriction ("beta and internal") and the Kyma labels
// that lift it, for messages.
func (r Restriction) describe() (kinds, labels string) {
	var k, l []string
	if r.Beta {
		k, l = append(k, "beta"), append(l, v1beta2.BetaLabel+"=true")
	}
	if r.Internal {
		k, l = append(k, "internal"), append(l, v1beta2.InternalLabel+"=true")
	}
	return strings.Join(k, " and "), strings.Join(l, " and ")
}

func labelTrue(labels map[string]string, key string) bool {
	return strings.EqualFold(labels[key], "true")
}

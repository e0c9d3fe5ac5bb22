package resolve_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

func TestRestriction(t *testing.T) {
	beta := map[string]string{v1beta2.BetaLabel: "true"}
	internal := map[string]string{v1beta2.InternalLabel: "true"}
	both := map[string]string{v1beta2.BetaLabel: "True", v1beta2.InternalLabel: "TRUE"}
	meta := func(b, i bool) *v1beta2.ModuleReleaseMeta {
		return &v1beta2.ModuleReleaseMeta{Spec: v1beta2.ModuleReleaseMetaSpec{Beta: b, Internal: i}}
	}
	tests := []struct {
		name   string
		labels map[string]string // the catalog object's
		meta   *v1beta2.ModuleReleaseMeta
		kyma   map[string]string
		unmet  resolve.Restriction
	}{
		{name: "unrestricted, unlabelled Kyma", kyma: nil},
		{name: "unrestricted, labelled Kyma", kyma: both},
		{name: "beta label, unlabelled Kyma", labels: beta, unmet: resolve.Restriction{Beta: true}},
		{name: "beta label, beta Kyma", labels: beta, kyma: beta},
		{name: "beta label, internal Kyma", labels: beta, kyma: internal, unmet: resolve.Restriction{Beta: true}},
		{name: "internal label, internal Kyma", labels: internal, kyma: internal},
		{name: "internal label, beta Kyma", labels: internal, kyma: beta, unmet: resolve.Restriction{Internal: true}},
		{name: "labels in any case", labels: both, kyma: both},
		{name: "both, unlabelled Kyma", labels: both, unmet: resolve.Restriction{Beta: true, Internal: true}},
		{name: "label false restricts nothing", labels: map[string]string{v1beta2.BetaLabel: "false"}},
		{name: "Kyma labelled false is not labelled", labels: beta, kyma: map[string]string{v1beta2.BetaLabel: "false"}, unmet: resolve.Restriction{Beta: true}},
		{name: "meta beta, unlabelled object", meta: meta(true, false), unmet: resolve.Restriction{Beta: true}},
		{name: "meta internal, internal Kyma", meta: meta(false, true), kyma: internal},
		{name: "meta and label add up", labels: beta, meta: meta(false, true), kyma: beta, unmet: resolve.Restriction{Internal: true}},
		{name: "meta without flags", meta: meta(false, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := resolve.RestrictionOf(tt.labels, tt.meta)
			g.Expect(r.Unmet(tt.kyma)).To(Equal(tt.unmet))
			g.Expect(r.VisibleTo(tt.kyma)).To(Equal(tt.unmet == resolve.Restriction{}))
		})
	}
}

package upgradepolicy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

const policyYAML = `
policies:
  - name: regulated
    selector: {matchLabels: {tier: regulated}}
    upgrade: Manual
    forceAfter: 168h
  - name: everyone
    upgrade: Automatic
    forceAfter: 720h
`

// The first entry whose selector matches a Kyma's labels applies; without
// a policy, or a matching entry, modules upgrade automatically and a
// module set to Manual gets the operator's default deadline.
func TestFor(t *testing.T) {
	g := NewWithT(t)
	p, err := Parse([]byte(policyYAML))
	g.Expect(err).NotTo(HaveOccurred())

	mode, after := p.For(map[string]string{"tier": "regulated"})
	g.Expect(mode).To(Equal(v1beta2.UpgradeManual))
	g.Expect(after).To(Equal(168 * time.Hour))

	mode, after = p.For(map[string]string{"tier": "dev"})
	g.Expect(mode).To(Equal(v1beta2.UpgradeAutomatic))
	g.Expect(after).To(Equal(720 * time.Hour))

	var none *Policy
	mode, after = none.For(map[string]string{"tier": "regulated"})
	g.Expect(mode).To(Equal(v1beta2.UpgradeAutomatic))
	g.Expect(after).To(Equal(DefaultForceAfter))

	narrow, err := Parse([]byte("policies:\n  - name: eu\n    selector: {matchLabels: {region: eu}}\n    upgrade: Manual\n    forceAfter: 1h\n"))
	g.Expect(err).NotTo(HaveOccurred())
	narrow.ForceAfter = 48 * time.Hour
	mode, after = narrow.For(map[string]string{"region": "us"})
	g.Expect(mode).To(Equal(v1beta2.UpgradeAutomatic))
	g.Expect(after).To(Equal(48*time.Hour), "no entry matches: the operator's --manual-upgrade-force-after")
}

// Every mistake in the file is refused at start-up and named with its
// entry: a deadline that is missing, zero or negative (a manual upgrade
// always has one), an unknown mode, a bad selector, an unknown field.
func TestParseRefusesMistakes(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"no forceAfter":       {"policies:\n  - name: a\n    upgrade: Manual\n", `upgrade policy 0 ("a"): forceAfter 0s: must be more than zero`},
		"zero forceAfter":     {"policies:\n  - name: a\n    upgrade: Manual\n    forceAfter: 0s\n", `forceAfter 0s: must be more than zero`},
		"negative forceAfter": {"policies:\n  - name: a\n    upgrade: Automatic\n    forceAfter: -1h\n", `forceAfter -1h0m0s: must be more than zero`},
		"unknown mode":        {"policies:\n  - name: a\n    upgrade: manual\n    forceAfter: 1h\n", `upgrade "manual": use Automatic or Manual`},
		"empty mode":          {"policies:\n  - name: a\n    forceAfter: 1h\n", `upgrade "": use Automatic or Manual`},
		"no name":             {"policies:\n  - upgrade: Manual\n    forceAfter: 1h\n", `upgrade policy 0 (""): name is empty`},
		"bad selector":        {"policies:\n  - name: a\n    selector: {matchExpressions: [{key: k, operator: Like}]}\n    upgrade: Manual\n    forceAfter: 1h\n", `selector:`},
		"unknown field":       {"policies:\n  - name: a\n    upgrade: Manual\n    forceAfter: 1h\n    force: true\n", `unknown field "force"`},
		"bad duration":        {"policies:\n  - name: a\n    upgrade: Manual\n    forceAfter: a month\n", `upgrade policies:`},
		"second entry":        {"policies:\n  - name: a\n    upgrade: Manual\n    forceAfter: 1h\n  - name: b\n    upgrade: Manual\n", `upgrade policy 1 ("b")`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Parse([]byte(tc.yaml))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	_, err := Load("/nonexistent/upgrade-policies.yaml")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("reading upgrade policies")))
}

// The operator's policy: the file, if any, and the default deadline, which
// must be more than zero.
func TestNew(t *testing.T) {
	g := NewWithT(t)
	p, err := New("", 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	mode, after := p.For(nil)
	g.Expect(mode).To(Equal(v1beta2.UpgradeAutomatic))
	g.Expect(after).To(Equal(48 * time.Hour))

	path := filepath.Join(t.TempDir(), "upgrade-policies.yaml")
	g.Expect(os.WriteFile(path, []byte(policyYAML), 0o600)).To(Succeed())
	p, err = New(path, 48*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	mode, after = p.For(map[string]string{"tier": "regulated"})
	g.Expect(mode).To(Equal(v1beta2.UpgradeManual))
	g.Expect(after).To(Equal(168 * time.Hour))

	_, err = New("", 0)
	g.Expect(err).To(MatchError(ContainSubstring("--manual-upgrade-force-after 0s: must be more than zero")))
	_, err = New("", -time.Hour)
	g.Expect(err).To(MatchError(ContainSubstring("must be more than zero")))
	g.Expect(os.WriteFile(path, []byte("policies:\n  - name: a\n    upgrade: Manual\n"), 0o600)).To(Succeed())
	_, err = New(path, time.Hour)
	g.Expect(err).To(MatchError(ContainSubstring(`upgrade policy 0 ("a"): forceAfter 0s`)))
}

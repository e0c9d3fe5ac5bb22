package backup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const schedulesYAML = `
schedules:
  - name: prod
    selector: {matchLabels: {env: prod}}
    schedule: "0 * * * *"
    timeZone: Europe/Berlin
    retention: {hourly: 48, weekly: 8}
    repository: registry.example/backups
    keySecret: backup-key
    includeSecrets: true
  - name: rest
    schedule: "@daily"
    repository: registry.example/backups
    recipients: [age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p]
`

func TestParse(t *testing.T) {
	g := NewWithT(t)
	s, err := Parse([]byte(schedulesYAML))
	g.Expect(err).NotTo(HaveOccurred())

	prod := s.For(map[string]string{"env": "prod"})
	g.Expect(prod).NotTo(BeNil())
	g.Expect(prod.Name).To(Equal("prod"))
	g.Expect(prod.Keep()).To(Equal(Retention{Hourly: 48, Daily: DefaultDaily, Weekly: 8}), "a count left out is its default")
	g.Expect(prod.Location().String()).To(Equal("Europe/Berlin"))
	g.Expect(prod.Next(time.Date(2026, 4, 5, 10, 20, 0, 0, time.UTC))).To(BeTemporally("==", time.Date(2026, 4, 5, 11, 0, 0, 0, time.UTC)))

	rest := s.For(map[string]string{"env": "dev"})
	g.Expect(rest.Name).To(Equal("rest"))
	g.Expect(rest.Keep()).To(Equal(DefaultRetention()))
	g.Expect(prod.IncludeSecrets).To(BeTrue())
	g.Expect(rest.IncludeSecrets).To(BeFalse(), "Secrets are backed up only when asked for")
	g.Expect(rest.InlineRecipients().Fingerprints()).To(Equal([]string{Fingerprint("age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p")}))
	g.Expect(prod.InlineRecipients().Len()).To(BeZero(), "its recipients are in the key Secret")

	var none *Schedules
	g.Expect(none.For(nil)).To(BeNil())
}

func TestParseNamesMistakes(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"bad cron", "schedules:\n  - {name: s, schedule: '0 25 * * *', repository: r.io/b, keySecret: k}\n", `backup schedule 0 ("s"): schedule "0 25 * * *"`},
		{"bad zone", "schedules:\n  - {name: s, schedule: '@hourly', timeZone: Nowhere/Land, repository: r.io/b, keySecret: k}\n", `timeZone "Nowhere/Land"`},
		{"no repository", "schedules:\n  - {name: s, schedule: '@hourly', keySecret: k}\n", "repository is empty"},
		{"bad repository", "schedules:\n  - {name: s, schedule: '@hourly', repository: 'r.io/UPPER', keySecret: k}\n", `repository "r.io/UPPER"`},
		{"no key", "schedules:\n  - {name: s, schedule: '@hourly', repository: r.io/b}\n", "no key: list the age public keys (age1…) backups are encrypted to under recipients"},
		{"a private key as recipient", "schedules:\n  - {name: s, schedule: '@hourly', repository: r.io/b, recipients: [AGE-SECRET-KEY-1XYZ]}\n", "recipients[0]: this is an age identity, a private key"},
		{"not a recipient", "schedules:\n  - {name: s, schedule: '@hourly', repository: r.io/b, recipients: [age1, age1nope]}\n", "recipients[0]: not an age recipient"},
		{"negative", "schedules:\n  - {name: s, schedule: '@hourly', repository: r.io/b, keySecret: k, retention: {daily: -1}}\n", "retention.daily is -1"},
		{"keeps nothing", "schedules:\n  - {name: s, schedule: '@hourly', repository: r.io/b, keySecret: k, retention: {hourly: 0, daily: 0, weekly: 0}}\n", "retention keeps nothing"},
		{"twice", "schedules:\n  - {name: s, schedule: '@hourly', repository: r.io/b, keySecret: k}\n  - {name: s, schedule: '@daily', repository: r.io/b, keySecret: k}\n", "the name is used twice"},
		{"unknown field", "schedules:\n  - {name: s, cron: '@hourly', repository: r.io/b, keySecret: k}\n", `unknown field "cron"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestParseNamesScheduleMistakes(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"negative jitter", "schedules:\n  - {name: s, schedule: '@hourly', jitter: -5m, repository: r.io/b, keySecret: k}\n", "jitter is -5m0s: it cannot be negative"},
		{"never fires", "schedules:\n  - {name: s, schedule: '0 0 30 2 *', repository: r.io/b, keySecret: k}\n", "it never fires"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

package hibernation

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const schedulesYAML = `
schedules:
  - name: dev-nights
    selector: {matchLabels: {env: dev}}
    hibernate: "0 20 * * 1-5"
    wake: "0 7 * * 1-5"
    timeZone: Europe/Berlin
  - name: weekends
    hibernate: "0 0 * * 6"
    wake: "0 0 * * 1"
`

// A runtime sleeps from its schedule's hibernate firing until its next
// wake firing; the first schedule that matches is its.
func TestAsleep(t *testing.T) {
	g := NewWithT(t)
	s, err := Parse([]byte(schedulesYAML))
	g.Expect(err).NotTo(HaveOccurred())
	berlin, _ := time.LoadLocation("Europe/Berlin")
	dev := map[string]string{"env": "dev"}

	// Tuesday 21:00 Berlin: asleep since 20:00, wakes Wednesday 07:00.
	sleep, asleep := s.Asleep(dev, time.Date(2026, 12, 1, 21, 0, 0, 0, berlin))
	g.Expect(asleep).To(BeTrue())
	g.Expect(sleep.Schedule).To(Equal("dev-nights"))
	g.Expect(sleep.Until).To(BeTemporally("==", time.Date(2026, 12, 2, 7, 0, 0, 0, berlin)))

	// Tuesday 12:00 Berlin: awake.
	_, asleep = s.Asleep(dev, time.Date(2026, 12, 1, 12, 0, 0, 0, berlin))
	g.Expect(asleep).To(BeFalse())

	// Friday 20:00 to Monday 07:00: asleep all weekend (no wake on Saturday).
	sleep, asleep = s.Asleep(dev, time.Date(2026, 12, 6, 12, 0, 0, 0, berlin))
	g.Expect(asleep).To(BeTrue())
	g.Expect(sleep.Until).To(BeTemporally("==", time.Date(2026, 12, 7, 7, 0, 0, 0, berlin)))

	// Other Kymas follow the weekend schedule (UTC).
	sleep, asleep = s.Asleep(map[string]string{"env": "prod"}, time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	g.Expect(asleep).To(BeTrue())
	g.Expect(sleep.Schedule).To(Equal("weekends"))
	_, asleep = s.Asleep(map[string]string{"env": "prod"}, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	g.Expect(asleep).To(BeFalse(), "awake from the wake firing on")

	var none *Schedules
	_, asleep = none.Asleep(dev, time.Now())
	g.Expect(asleep).To(BeFalse(), "no schedules: nobody sleeps")
}

func TestParseNamesMistakes(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte("schedules:\n  - name: s\n    hibernate: \"0 25 * * *\"\n    wake: \"0 7 * * *\"\n"))
	g.Expect(err).To(MatchError(ContainSubstring(`hibernation schedule 0 ("s"): hibernate "0 25 * * *"`)))
	_, err = Parse([]byte("schedules:\n  - name: s\n    hibernate: \"0 20 * * *\"\n    wake: \"0 7 * * *\"\n    timeZone: Nowhere/Land\n"))
	g.Expect(err).To(MatchError(ContainSubstring(`timeZone "Nowhere/Land"`)))
	_, err = Parse([]byte("schedules:\n  - name: s\n    hibernate: \"0 20 1 1 *\"\n    wake: \"0 7 * * *\"\n"))
	g.Expect(err).To(MatchError(ContainSubstring(`hibernate "0 20 1 1 *" fires less often than every 192h0m0s`)))
}

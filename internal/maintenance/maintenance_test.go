package maintenance

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const policyYAML = `
windows:
  - name: eu-weekend
    selector: {matchLabels: {region: eu}}
    days: [Sat, Sun]
    start: "02:00"
    duration: 4h
    timeZone: Europe/Berlin
  - name: everyone
    days: [Wed]
    start: "22:00"
    duration: 4h
`

// A runtime's slot is in the first window that matches it, at a point of
// its own in the window's current or next opening; the point is stable
// for the opening and differs between runtimes.
func TestSlotFor(t *testing.T) {
	g := NewWithT(t)
	p, err := Parse([]byte(policyYAML))
	g.Expect(err).NotTo(HaveOccurred())
	berlin, _ := time.LoadLocation("Europe/Berlin")

	// A Tuesday: the EU runtime's next opening is Saturday 02:00 Berlin.
	tuesday := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	slot, ok := p.SlotFor("kyma-a", map[string]string{"region": "eu"}, tuesday)
	g.Expect(ok).To(BeTrue())
	g.Expect(slot.Window).To(Equal("eu-weekend"))
	opens := time.Date(2026, 12, 5, 2, 0, 0, 0, berlin)
	g.Expect(slot.At).To(BeTemporally(">=", opens))
	g.Expect(slot.At).To(BeTemporally("<", opens.Add(3*time.Hour)), "within the first three quarters")
	g.Expect(slot.Closes).To(BeTemporally("==", opens.Add(4*time.Hour)))
	g.Expect(slot.Open(tuesday)).To(BeFalse())
	g.Expect(slot.Open(slot.At)).To(BeTrue())
	g.Expect(slot.Open(slot.Closes)).To(BeFalse())

	again, _ := p.SlotFor("kyma-a", map[string]string{"region": "eu"}, slot.At.Add(time.Minute))
	g.Expect(again).To(Equal(slot), "stable inside the opening")
	other, _ := p.SlotFor("kyma-b", map[string]string{"region": "eu"}, tuesday)
	g.Expect(other.At).NotTo(Equal(slot.At), "runtimes are spread over the window")

	// An opening that began yesterday evening is still open after midnight.
	thursdayEarly := time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)
	slot, ok = p.SlotFor("kyma-c", nil, thursdayEarly)
	g.Expect(ok).To(BeTrue())
	g.Expect(slot.Window).To(Equal("everyone"))
	g.Expect(slot.Closes).To(BeTemporally("==", time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)))

	// Once it closed, the next Wednesday.
	slot, _ = p.SlotFor("kyma-c", nil, time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC))
	g.Expect(slot.At).To(BeTemporally(">=", time.Date(2026, 12, 9, 22, 0, 0, 0, time.UTC)))
}

func TestParseNamesMistakes(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte("windows:\n  - name: w\n    days: [Funday]\n    start: \"25:00\"\n    duration: 48h\n"))
	g.Expect(err).To(MatchError(ContainSubstring(`maintenance window 0 ("w"): day "Funday": use Mon, Tue, Wed, Thu, Fri, Sat or Sun`)))
	_, err = Parse([]byte("windows:\n  - name: w\n    days: [Mon]\n    start: \"03:00\"\n    duration: 48h\n"))
	g.Expect(err).To(MatchError(ContainSubstring("duration 48h0m0s: between 1m and 24h")))
	_, err = Parse([]byte("windows:\n  - name: w\n    days: [Mon]\n    start: \"03:00\"\n    duration: 1h\n    timeZone: Mars/Olympus\n"))
	g.Expect(err).To(MatchError(ContainSubstring(`timeZone "Mars/Olympus"`)))
	_, err = Parse([]byte("windows:\n  - name: w\n    dayz: [Mon]\n"))
	g.Expect(err).To(MatchError(ContainSubstring("unknown field")))
}

package rollout

import (
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// moveTo gives the admitted runtimes version, in state.
func (f *fleet) moveTo(admitted []string, version string, state v1beta2.State) {
	for i := range f.runtimes {
		if slices.Contains(admitted, f.runtimes[i].Kyma) {
			f.runtimes[i].Version, f.runtimes[i].State = version, state
		}
	}
}

// run plans until the rollout settles (Completed or Halted), moving each
// admitted wave to version in state, and returns the waves. It fails the
// test when more than maxInFlight move at once.
func (f *fleet) run(g Gomega, spec v1beta2.ModuleRolloutSpec, status v1beta2.ModuleRolloutStatus, ch Channel, version string, now time.Time) (v1beta2.ModuleRolloutStatus, [][]string) {
	var waves [][]string
	for range 100 {
		next, _, err := Plan(spec, status, ch, f.runtimes, now)
		g.Expect(err).NotTo(HaveOccurred())
		status = next
		if status.Phase == v1beta2.RolloutCompleted || status.Phase == v1beta2.RolloutHalted {
			return status, waves
		}
		if len(status.InFlight) > 0 {
			g.Expect(len(status.InFlight)).To(BeNumerically("<=", 5))
			waves = append(waves, status.InFlight)
			f.moveTo(status.InFlight, version, v1beta2.StateReady)
		}
		now = now.Add(time.Minute)
	}
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted), "the rollout settles")
	return status, waves
}

// A finished rollout rolled back (spec.rollback): the runtimes go back to
// the earlier version in waves, canary first, although the channel still
// points to the later one; the record says who asked and why, and the
// same value does not act twice.
func TestPlanRollsBackInWaves(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(12, 2, 9)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	status, _, _ := Plan(policy(), v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	status, _ = f.run(g, policy(), status, v2, "2.0.0", now)
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted))
	g.Expect(f.at("2.0.0")).To(HaveLen(12))

	spec := policy()
	spec.Rollback = "alice: 2.0.0 loses events"
	v1Back := v2
	v1Back.ContentOf = "1.0.0"
	status, _, err := Plan(spec, status, v1Back, f.runtimes, now.Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.FromVersion).To(Equal("2.0.0"))
	g.Expect(status.ToVersion).To(Equal("1.0.0"))
	g.Expect(status.Template).To(Equal(releases["1.0.0"].Template))
	g.Expect(status.Rollback).NotTo(BeNil())
	g.Expect(status.Rollback.By).To(Equal(spec.Rollback))
	g.Expect(status.Rollback.Of).To(Equal("2.0.0"))
	g.Expect(status.Rollback.Refused).To(BeEmpty())
	g.Expect(status.InFlight).To(ConsistOf("kyma-02", "kyma-09"), "the canaries go back first")
	g.Expect(status.Pending).To(Equal(int32(10)))

	status, waves := f.run(g, spec, status, v1Back, "1.0.0", now.Add(time.Hour))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted))
	g.Expect(f.at("1.0.0")).To(HaveLen(12), "every runtime is back")
	g.Expect(len(waves)).To(BeNumerically(">=", 2), "in waves after the canary")

	// The channel still points to 2.0.0: the fleet stays rolled back.
	again, _, err := Plan(spec, status, v1Back, f.runtimes, now.Add(3*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.ToVersion).To(Equal("1.0.0"))
	g.Expect(again.InFlight).To(BeEmpty())
	g.Expect(again.Phase).To(Equal(v1beta2.RolloutCompleted))

	// A new version on the channel starts a rollout from 1.0.0 again.
	v3 := Channel{Version: "3.0.0", Template: "kcp-system/m-3.0.0@9", ContentOf: "3.0.0",
		Releases: map[string]Release{"1.0.0": releases["1.0.0"], "2.0.0": releases["2.0.0"], "3.0.0": {Template: "kcp-system/m-3.0.0@9"}}}
	status, _, err = Plan(spec, again, v3, f.runtimes, now.Add(4*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.FromVersion).To(Equal("1.0.0"))
	g.Expect(status.ToVersion).To(Equal("3.0.0"))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing))
	g.Expect(status.Rollback.Of).To(BeEmpty(), "the rollback is over; its record stays so that it does not act again")
	g.Expect(status.InFlight).To(ConsistOf("kyma-02", "kyma-09"))
}

// A version that does not declare where it may go back to is never rolled
// back: the rollback is refused with the reason, and nothing moves.
func TestPlanRefusesARollbackItsVersionDoesNotDeclare(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(6, 0)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	undeclared := v2
	undeclared.Releases = map[string]Release{"1.0.0": releases["1.0.0"], "2.0.0": {Template: v2.Template}}
	status, _, _ := Plan(policy(), v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	status, _ = f.run(g, policy(), status, undeclared, "2.0.0", now)
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted))

	spec := policy()
	spec.Rollback = "bob: please"
	for range 2 {
		status, _, _ = Plan(spec, status, undeclared, f.runtimes, now.Add(time.Hour))
		g.Expect(status.ToVersion).To(Equal("2.0.0"), "no rollback")
		g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(status.InFlight).To(BeEmpty())
		g.Expect(status.Rollback).NotTo(BeNil())
		g.Expect(status.Rollback.By).To(Equal("bob: please"))
		g.Expect(status.Rollback.Refused).To(ContainSubstring("2.0.0 does not list 1.0.0 in its ModuleTemplate's spec.rollbackTo"))
	}
	g.Expect(f.at("2.0.0")).To(HaveLen(6))

	// Moving the channel back does not downgrade either: the rollout halts
	// and says what to do.
	status, _, _ = Plan(policy(), status, Channel{Version: "1.0.0", Template: v1.Template, ContentOf: "1.0.0", Releases: undeclared.Releases}, f.runtimes, now.Add(2*time.Hour))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
	g.Expect(status.HaltReason).To(ContainSubstring("at 2.0.0, which does not list 1.0.0 in its ModuleTemplate's spec.rollbackTo"))
	g.Expect(status.InFlight).To(BeEmpty())
}

// The channel moved back to a version the later one declares: the runtimes
// go back in waves, as for any new version.
func TestPlanMovesTheChannelBackInWaves(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(8, 1)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	status, _, _ := Plan(policy(), v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	status, _ = f.run(g, policy(), status, v2, "2.0.0", now)
	status, waves := f.run(g, policy(), status, v1, "1.0.0", now.Add(time.Hour))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted))
	g.Expect(status.FromVersion).To(Equal("2.0.0"))
	g.Expect(f.at("1.0.0")).To(HaveLen(8))
	g.Expect(waves[0]).To(Equal([]string{"kyma-01"}), "the canary goes back first")
}

// The rollout pins its version's content at its start; a tag that later
// resolves to other bytes halts it, and waves keep the pinned content.
func TestPlanHaltsWhenTheContentMoves(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(10, 0)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	pinnedAtStart := []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://registry.test/m@sha256:aaaa"}}
	ch := v2
	ch.Content = pinnedAtStart
	status, _, _ := Plan(policy(), v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	status, _, err := Plan(policy(), status, ch, f.runtimes, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Content).To(Equal(pinnedAtStart))
	g.Expect(status.InFlight).To(ConsistOf("kyma-00"))
	f.move(status.InFlight, v1beta2.StateReady)

	unpinned := ch
	unpinned.PinErr = errRegistryDown
	unpinned.Content = nil
	status, _, _ = Plan(policy(), status, unpinned, f.runtimes, now.Add(2*time.Minute))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing))
	g.Expect(status.InFlight).To(BeEmpty(), "no wave starts while the content cannot be checked")
	g.Expect(status.Content).To(Equal(pinnedAtStart))

	moved := ch
	moved.Content = []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://registry.test/m@sha256:bbbb"}}
	status, _, _ = Plan(policy(), status, moved, f.runtimes, now.Add(3*time.Minute))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
	g.Expect(status.HaltReason).To(ContainSubstring("rawManifest now resolves to oci://registry.test/m@sha256:bbbb, the rollout pinned oci://registry.test/m@sha256:aaaa"))
	g.Expect(status.Content).To(Equal(pinnedAtStart), "the pins stay what they were")
	g.Expect(f.at("2.0.0")).To(ConsistOf("kyma-00"))
}

// Runtimes that cannot move now are skipped by waves and pending with
// their reason; one in flight that cannot move goes back to pending at the
// deadline instead of failing; the rollout waits for them rather than
// halting.
func TestPlanWavesSkipRuntimesThatCannotMove(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(6)
	spec := policy()
	spec.Canary = nil
	spec.SoakTime = metav1.Duration{}
	spec.ProgressDeadline = metav1.Duration{Duration: 10 * time.Minute}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	status, _, _ := Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	hibernated := "hibernated until 2026-12-03T18:00:00Z"
	f.runtimes[4].Blocked = hibernated
	f.runtimes[5].Blocked = "paused"

	status, _, _ = Plan(spec, status, v2, f.runtimes, now)
	g.Expect(status.InFlight).To(ConsistOf("kyma-00", "kyma-01", "kyma-02", "kyma-03"), "not those that cannot move")
	g.Expect(status.Runtimes.Pending).To(Equal([]v1beta2.RolloutRuntime{{Kyma: "kyma-04", Reason: hibernated}, {Kyma: "kyma-05", Reason: "paused"}}),
		"pending with their reasons; the admitted ones are not pending")
	f.move([]string{"kyma-00", "kyma-01", "kyma-02"}, v1beta2.StateReady)
	f.runtimes[3].Blocked = "paused" // paused after its wave started, before it moved

	status, _, _ = Plan(spec, status, v2, f.runtimes, now.Add(11*time.Minute))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing), "a runtime that cannot move is not a failure")
	g.Expect(status.Failed).To(BeEmpty())
	g.Expect(status.InFlight).To(BeEmpty(), "it no longer blocks the wave")
	g.Expect(status.Runtimes.Pending).To(ConsistOf(
		v1beta2.RolloutRuntime{Kyma: "kyma-03", Reason: "paused"},
		v1beta2.RolloutRuntime{Kyma: "kyma-04", Reason: hibernated},
		v1beta2.RolloutRuntime{Kyma: "kyma-05", Reason: "paused"}))
	g.Expect(status.Pending).To(Equal(int32(3)))
	g.Expect(status.Runtimes.Done).To(ConsistOf("kyma-00", "kyma-01", "kyma-02"))

	// It wakes: the next wave takes it.
	f.runtimes[4].Blocked = ""
	status, _, _ = Plan(spec, status, v2, f.runtimes, now.Add(12*time.Minute))
	g.Expect(status.InFlight).To(ConsistOf("kyma-04"))
}

// A wave passes only once its analyses did, the last wave too; a failed
// analysis counts like a failed runtime.
func TestPlanGatesWavesOnAnalyses(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(10, 0, 1)
	spec := policy()
	spec.SoakTime = metav1.Duration{}
	spec.Analysis = []v1beta2.RolloutAnalysis{{Name: "error-rate", Prometheus: &v1beta2.PrometheusAnalysis{Query: "x", Max: "0.05"}}}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	status, _, _ := Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	status, _, _ = Plan(spec, status, v2, f.runtimes, now)
	canary := status.InFlight
	g.Expect(status.WaveMembers).To(Equal(canary))
	f.move(canary, v1beta2.StateReady)

	status, after, _ := Plan(spec, status, v2, f.runtimes, now.Add(time.Minute))
	g.Expect(status.InFlight).To(BeEmpty())
	g.Expect(status.Wave).To(Equal(int32(0)), "no next wave before the canaries were analysed")
	g.Expect(after).To(BeNumerically(">", 0))

	analysed := func(kymas []string, failed, inconclusive string) {
		for i := range f.runtimes {
			if slices.Contains(kymas, f.runtimes[i].Kyma) {
				f.runtimes[i].Analysed, f.runtimes[i].AnalysisFailed, f.runtimes[i].AnalysisInconclusive = true, failed, inconclusive
			}
		}
	}
	analysed(canary, "", "Prometheus unreachable")
	status, _, _ = Plan(spec, status, v2, f.runtimes, now.Add(2*time.Minute))
	g.Expect(status.Wave).To(Equal(int32(0)), "an inconclusive analysis never passes")
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing))

	analysed(canary, "", "")
	status, _, _ = Plan(spec, status, v2, f.runtimes, now.Add(3*time.Minute))
	g.Expect(status.Wave).To(Equal(int32(1)), "passed: the next wave")
	wave := status.InFlight
	f.move(wave, v1beta2.StateReady)
	analysed(canary, "", "")
	analysed(wave[:1], "error-rate: 0.21 > max 0.05", "")
	status, _, _ = Plan(spec, status, v2, f.runtimes, now.Add(4*time.Minute))
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
	g.Expect(status.HaltReason).To(ContainSubstring(wave[0] + " (analysis error-rate: 0.21 > max 0.05)"))
	g.Expect(status.Runtimes.Failed).To(ContainElement(v1beta2.RolloutRuntime{Kyma: wave[0], Reason: "analysis error-rate: 0.21 > max 0.05"}))
	g.Expect(f.at("2.0.0")).To(HaveLen(2+len(wave)), "no other runtime moved")
}

var errRegistryDown = errorString("registry unreachable")

type errorString string

func (e errorString) Error() string { return string(e) }

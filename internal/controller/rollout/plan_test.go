package rollout

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// fleet is a simulated fleet for Plan: what the Kyma and Manifest
// controllers would do with its decisions, without them.
type fleet struct {
	runtimes []Runtime
}

func newFleet(n int, canaries ...int) *fleet {
	f := &fleet{}
	for i := range n {
		labels := map[string]string{}
		if slices.Contains(canaries, i) {
			labels["canary"] = "true"
		}
		f.runtimes = append(f.runtimes, Runtime{Kyma: fmt.Sprintf("kyma-%02d", i), Labels: labels, Version: "1.0.0", State: v1beta2.StateReady, Current: true})
	}
	return f
}

// move gives the admitted runtimes version 2.0.0, in state.
func (f *fleet) move(admitted []string, state v1beta2.State) {
	for i := range f.runtimes {
		if slices.Contains(admitted, f.runtimes[i].Kyma) {
			f.runtimes[i].Version, f.runtimes[i].State = "2.0.0", state
		}
	}
}

func (f *fleet) at(version string) []string {
	var names []string
	for _, rt := range f.runtimes {
		if rt.Version == version {
			names = append(names, rt.Kyma)
		}
	}
	return names
}

var (
	v1 = Channel{Version: "1.0.0", Template: "kcp-system/m-1.0.0@1", ContentOf: "1.0.0", Releases: releases}
	v2 = Channel{Version: "2.0.0", Template: "kcp-system/m-2.0.0@7", ContentOf: "2.0.0", Releases: releases}

	releases = map[string]Release{
		"1.0.0": {Template: "kcp-system/m-1.0.0@1"},
		"2.0.0": {Template: "kcp-system/m-2.0.0@7", RollbackTo: []string{"1.x"}},
	}
)

func policy() v1beta2.ModuleRolloutSpec {
	return v1beta2.ModuleRolloutSpec{
		ModuleName: "shop", Channel: "regular",
		Canary: &v1beta2.RolloutCanary{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}},
			Count:    intstr.FromInt32(2),
		},
		MaxInFlight: intstr.FromInt32(5),
		SoakTime:    metav1.Duration{Duration: time.Minute},
		MaxFailures: intstr.FromInt32(0),
	}
}

// 20 runtimes, a canary of 2 chosen by label, then waves of at most 5, each
// started only after the one before is Ready and has soaked a minute.
func TestPlanMovesTheFleetInWaves(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(20, 3, 7, 11)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	status, _, err := Plan(policy(), v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted), "the first version seen is where the fleet stands")
	g.Expect(status.ToVersion).To(Equal("1.0.0"))

	var waves [][]string
	for step := 0; step < 50; step++ {
		status, _, err = Plan(policy(), status, v2, f.runtimes, now)
		g.Expect(err).NotTo(HaveOccurred())
		if status.Phase == v1beta2.RolloutCompleted {
			break
		}
		g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing))
		g.Expect(len(status.InFlight)).To(BeNumerically("<=", 5), "never more than maxInFlight at once")
		if len(status.InFlight) > 0 {
			g.Expect(status.WaveReadyAt).To(BeNil())
			waves = append(waves, status.InFlight)
			f.move(status.InFlight, v1beta2.StateReady)
			continue
		}
		// The wave is Ready: nothing moves before it soaked.
		g.Expect(status.WaveReadyAt).NotTo(BeNil())
		again, after, err := Plan(policy(), status, v2, f.runtimes, now.Add(30*time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.InFlight).To(BeEmpty(), "soaking")
		g.Expect(after).To(Equal(30 * time.Second))
		now = now.Add(time.Minute)
	}
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutCompleted))
	g.Expect(status.CompletedAt).NotTo(BeNil())
	g.Expect(f.at("2.0.0")).To(HaveLen(20))
	sizes := []int{}
	for _, w := range waves {
		sizes = append(sizes, len(w))
	}
	g.Expect(sizes).To(Equal([]int{2, 5, 5, 5, 3}))
	g.Expect(waves[0]).To(HaveLen(2))
	g.Expect([]string{"kyma-03", "kyma-07", "kyma-11"}).To(ContainElements(waves[0]), "the canary wave is chosen among the labelled Kymas")
	g.Expect(status.Wave).To(Equal(int32(4)))
}

// A canary that fails halts the rollout: no further wave, the status names
// the failing runtime, and the rollout goes on once it recovers.
func TestPlanHaltsOnAFailingCanary(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(20, 3, 7)
	now := time.Now()
	status, _, _ := Plan(policy(), v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	status, _, err := Plan(policy(), status, v2, f.runtimes, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.InFlight).To(ConsistOf("kyma-03", "kyma-07"))
	f.move([]string{"kyma-03"}, v1beta2.StateReady)
	f.move([]string{"kyma-07"}, v1beta2.StateError)

	for range 3 {
		status, _, err = Plan(policy(), status, v2, f.runtimes, now.Add(time.Hour))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
		g.Expect(status.HaltReason).To(ContainSubstring("1 of 20 runtimes failed at 2.0.0, more than maxFailures allows (0): kyma-07"))
		g.Expect(status.Failed).To(ConsistOf("kyma-07"))
		g.Expect(status.InFlight).To(BeEmpty())
	}
	g.Expect(f.at("2.0.0")).To(ConsistOf("kyma-03", "kyma-07"), "no other runtime is upgraded")

	f.move([]string{"kyma-07"}, v1beta2.StateReady)
	halted := status
	status, _, err = Plan(policy(), halted, v2, f.runtimes, now.Add(2*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted), "a halt holds after the fleet recovered, until someone resumes it")
	g.Expect(status.HaltReason).To(ContainSubstring("kyma-07"), "and still says why it halted")
	g.Expect(status.Failed).To(BeEmpty(), "the counts are current")
	g.Expect(status.InFlight).To(BeEmpty())

	auto := policy()
	auto.AutoResume = true
	resumedByItself, _, err := Plan(auto, halted, v2, f.runtimes, now.Add(2*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resumedByItself.Phase).To(Equal(v1beta2.RolloutProgressing), "autoResume: a recovered fleet goes on by itself")

	resume := policy()
	resume.Resume = "alice: kyma-07 fixed by hand"
	status, _, err = Plan(resume, status, v2, f.runtimes, now.Add(3*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing), "resumed")
	g.Expect(status.ResumedBy).To(Equal("alice: kyma-07 fixed by hand"))
	g.Expect(status.ResumedAt.Time.Equal(now.Add(3 * time.Hour))).To(BeTrue())
	status, _, err = Plan(resume, status, v2, f.runtimes, now.Add(3*time.Hour+time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.InFlight).NotTo(BeEmpty(), "the next wave, once the canaries soaked")

	// A failure after the resume halts again, and the same resume does not
	// lift it: it was acted on.
	f.move(status.InFlight[:1], v1beta2.StateError)
	for range 2 {
		status, _, err = Plan(resume, status, v2, f.runtimes, now.Add(4*time.Hour))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
	}
}

// paused holds the next wave and lets the one in flight finish; resuming
// continues with the next wave, not from the start.
func TestPlanPauseAndResume(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(12, 0, 1)
	spec := policy()
	spec.SoakTime = metav1.Duration{}
	now := time.Now()
	status, _, _ := Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, now)
	status, _, _ = Plan(spec, status, v2, f.runtimes, now)
	canary := status.InFlight
	g.Expect(canary).To(HaveLen(2))

	spec.Paused = true
	status, _, _ = Plan(spec, status, v2, f.runtimes, now)
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutPaused))
	g.Expect(status.InFlight).To(Equal(canary), "the wave in flight stays admitted")
	f.move(canary, v1beta2.StateReady)
	for range 3 {
		status, _, _ = Plan(spec, status, v2, f.runtimes, now)
		g.Expect(status.Phase).To(Equal(v1beta2.RolloutPaused))
		g.Expect(status.InFlight).To(BeEmpty(), "no new wave while paused")
	}

	spec.Paused = false
	status, _, _ = Plan(spec, status, v2, f.runtimes, now)
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing))
	g.Expect(status.Wave).To(Equal(int32(1)))
	g.Expect(status.InFlight).To(HaveLen(5))
	g.Expect(status.InFlight).NotTo(ContainElements(canary))
}

// A change of the new version's template during the rollout halts it: the
// waves after it would get other content than the ones before.
func TestPlanHaltsWhenTheTemplateChanges(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(4)
	spec := policy()
	spec.Canary = nil
	status, _, _ := Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, time.Now())
	status, _, _ = Plan(spec, status, v2, f.runtimes, time.Now())
	g.Expect(status.InFlight).To(HaveLen(4))
	edited := v2
	edited.Template = "kcp-system/m-2.0.0@8"
	status, _, _ = Plan(spec, status, edited, f.runtimes, time.Now())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
	g.Expect(status.HaltReason).To(ContainSubstring("changed during the rollout"))
}

// A canary selector that matches no runtime halts rather than skipping the
// canary; percentages scale with the fleet.
func TestPlanCanaryWithoutCandidatesHalts(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(10)
	status, _, _ := Plan(policy(), v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, time.Now())
	status, _, _ = Plan(policy(), status, v2, f.runtimes, time.Now())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
	g.Expect(status.HaltReason).To(ContainSubstring("matches canary.selector"))

	spec := policy()
	spec.Canary = &v1beta2.RolloutCanary{Count: intstr.FromString("10%")}
	spec.MaxInFlight = intstr.FromString("25%")
	status, _, _ = Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, time.Now())
	status, _, _ = Plan(spec, status, v2, f.runtimes, time.Now())
	g.Expect(status.InFlight).To(HaveLen(1), "10% of 10")
	f.move(status.InFlight, v1beta2.StateReady)
	status, _, _ = Plan(spec, status, v2, f.runtimes, time.Now().Add(time.Hour))
	status, _, _ = Plan(spec, status, v2, f.runtimes, time.Now().Add(2*time.Hour))
	g.Expect(status.InFlight).To(HaveLen(3), "25% of 10, rounded up")
}

// The soak counts from WaveReadyAt as the API server returns it: no wave
// starts before the soak ended, however close to a second's end the wave
// became Ready, and none waits longer either.
func TestPlanSoakSurvivesTheStatusRoundTrip(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(4)
	spec := policy()
	spec.Canary = nil
	spec.MaxInFlight = intstr.FromInt32(2)
	spec.SoakTime = metav1.Duration{Duration: 5 * time.Second}
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	status, _, err := Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, start)
	g.Expect(err).NotTo(HaveOccurred())
	status, _, err = Plan(spec, status, v2, f.runtimes, start)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.InFlight).To(HaveLen(2))
	f.move(status.InFlight, v1beta2.StateReady)

	ready := start.Add(900 * time.Millisecond)
	status, after, err := Plan(spec, status, v2, f.runtimes, ready)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.WaveReadyAt).NotTo(BeNil())
	g.Expect(after).To(Equal(5 * time.Second))

	// Read back as the API server returns it.
	data, err := json.Marshal(status)
	g.Expect(err).NotTo(HaveOccurred())
	var stored v1beta2.ModuleRolloutStatus
	g.Expect(json.Unmarshal(data, &stored)).To(Succeed())
	soaking, _, err := Plan(spec, stored, v2, f.runtimes, ready.Add(4990*time.Millisecond))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(soaking.Wave).To(Equal(status.Wave), "no new wave before the soak ended")
	g.Expect(soaking.InFlight).To(BeEmpty())
	soaked, _, err := Plan(spec, stored, v2, f.runtimes, ready.Add(5*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(soaked.Wave).To(Equal(status.Wave+1), "the next wave starts when the soak ended")
}

// A runtime of a wave that is not Ready within progressDeadline (here it
// stays Warning) counts as failed and halts the rollout (maxFailures 0);
// without a deadline it would keep the rollout Progressing for ever. Once
// it is Ready, the rollout goes on.
func TestPlanCountsARuntimePastItsProgressDeadlineAsFailed(t *testing.T) {
	g := NewWithT(t)
	spec := policy()
	spec.Canary = nil
	spec.MaxInFlight = intstr.FromInt32(2)
	spec.SoakTime = metav1.Duration{}
	spec.ProgressDeadline = metav1.Duration{Duration: 10 * time.Minute}
	f := newFleet(4)
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	status, _, _ := Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, start)
	status, _, err := Plan(spec, status, v2, f.runtimes, start)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.InFlight).To(HaveLen(2))
	ready, late := status.InFlight[0], status.InFlight[1]
	f.move([]string{ready}, v1beta2.StateReady)
	f.move([]string{late}, v1beta2.StateWarning)

	status, after, err := Plan(spec, status, v2, f.runtimes, start.Add(4*time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing))
	g.Expect(status.InFlight).To(ConsistOf(late))
	g.Expect(after).To(Equal(6*time.Minute), "looked at again when the deadline ends")

	noDeadline := spec
	noDeadline.ProgressDeadline = metav1.Duration{}
	waiting, _, err := Plan(noDeadline, status, v2, f.runtimes, start.Add(100*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting.Phase).To(Equal(v1beta2.RolloutProgressing), "without a deadline a Warning runtime is waited for without end")

	status, _, err = Plan(spec, status, v2, f.runtimes, start.Add(10*time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutHalted))
	g.Expect(status.Failed).To(ConsistOf(late))
	g.Expect(status.InFlight).To(BeEmpty())
	g.Expect(status.HaltReason).To(ContainSubstring(late + " (not Ready within progressDeadline (10m0s))"))
	g.Expect(status.Runtimes.Failed).To(ContainElement(v1beta2.RolloutRuntime{Kyma: late, Reason: "not Ready within progressDeadline (10m0s)"}))
	g.Expect(f.at("2.0.0")).To(HaveLen(2), "no further wave")

	f.move([]string{late}, v1beta2.StateReady)
	spec.Resume = "bob: " + late + " is Ready now"
	status, _, err = Plan(spec, status, v2, f.runtimes, start.Add(11*time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing), "resumed: a late runtime that is Ready is done")
	g.Expect(status.Done).To(Equal(int32(2)))
	g.Expect(status.InFlight).To(HaveLen(2), "the next wave")
}

// A runtime of the wave that fails during the soak (within maxFailures),
// recovers, or is not Ready for a while, starts the soak again: the next
// wave waits until the wave has been steady for soakTime.
func TestPlanSoakRestartsWhenTheWaveChangesDuringIt(t *testing.T) {
	g := NewWithT(t)
	spec := policy()
	spec.MaxFailures = intstr.FromInt32(1)
	f := newFleet(20, 3, 7)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var lastStatus v1beta2.ModuleRolloutStatus
	plan := func(at time.Duration) v1beta2.ModuleRolloutStatus {
		t.Helper()
		status, _, err := Plan(spec, lastStatus, v2, f.runtimes, t0.Add(at))
		g.Expect(err).NotTo(HaveOccurred())
		lastStatus = status
		return status
	}
	lastStatus, _, _ = Plan(spec, v1beta2.ModuleRolloutStatus{}, v1, f.runtimes, t0)
	g.Expect(plan(0).InFlight).To(ConsistOf("kyma-03", "kyma-07"))
	f.move([]string{"kyma-03", "kyma-07"}, v1beta2.StateReady)
	g.Expect(plan(0).WaveReadyAt.Time).To(Equal(t0), "soaking from now")

	setState(f, "kyma-07", v1beta2.StateError)
	status := plan(50 * time.Second)
	g.Expect(status.Phase).To(Equal(v1beta2.RolloutProgressing), "one failure is within maxFailures")
	g.Expect(status.WaveReadyAt.Time).To(Equal(t0.Add(50*time.Second)), "the soak starts again")
	g.Expect(plan(70*time.Second).InFlight).To(BeEmpty(), "the first soak would have ended; the new one has not")

	setState(f, "kyma-07", v1beta2.StateReady)
	g.Expect(plan(80*time.Second).WaveReadyAt.Time).To(Equal(t0.Add(80*time.Second)), "recovered: soak again from now")

	setState(f, "kyma-03", v1beta2.StateProcessing)
	g.Expect(plan(100*time.Second).WaveReadyAt).To(BeNil(), "not Ready: no soak")
	setState(f, "kyma-03", v1beta2.StateReady)
	g.Expect(plan(110 * time.Second).WaveReadyAt.Time).To(Equal(t0.Add(110 * time.Second)))
	g.Expect(plan(169 * time.Second).InFlight).To(BeEmpty())
	g.Expect(plan(170*time.Second).InFlight).To(HaveLen(5), "steady for a minute: the next wave")
}

func setState(f *fleet, kyma string, state v1beta2.State) {
	for i := range f.runtimes {
		if f.runtimes[i].Kyma == kyma {
			f.runtimes[i].State = state
		}
	}
}

package fleetbench

import (
	"math"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestPlannedWaves(t *testing.T) {
	tests := []struct {
		policy RolloutOptions
		n      int
		want   []int
	}{
		{RolloutOptions{Canary: 2, MaxInFlight: intstr.FromInt32(4)}, 10, []int{2, 4, 4}},
		{RolloutOptions{Canary: 2, MaxInFlight: intstr.FromString("20%")}, 50, []int{2, 10, 10, 10, 10, 8}},
		{RolloutOptions{MaxInFlight: intstr.FromString("30%")}, 10, []int{3, 3, 3, 1}},
		{RolloutOptions{Canary: 5, MaxInFlight: intstr.FromInt32(0)}, 3, []int{3}},
	}
	for _, tt := range tests {
		if got := tt.policy.plannedWaves(tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("plannedWaves(%+v, %d) = %v, want %v", tt.policy, tt.n, got, tt.want)
		}
	}
	bad := RolloutOptions{MaxInFlight: intstr.FromString("many")}
	if err := bad.validate(10); err == nil {
		t.Error("maxInFlight \"many\" was accepted")
	}
}

// The recorder turns the statuses the watch delivers into waves: admitted
// when a wave first appears, Ready when the status says so, or when the
// next wave or the completion shows it was (no soak: one write does both).
func TestRolloutRecorderFigures(t *testing.T) {
	rec := &rolloutRecorder{}
	status := func(wave int32, inFlight int, ready bool, phase v1beta2.RolloutPhase) *v1beta2.ModuleRollout {
		ro := &v1beta2.ModuleRollout{ObjectMeta: metav1.ObjectMeta{Name: rolloutName}}
		ro.Status = v1beta2.ModuleRolloutStatus{ToVersion: "3.0.0", Wave: wave, Phase: phase, StartedAt: &metav1.Time{}}
		for i := range inFlight {
			ro.Status.InFlight = append(ro.Status.InFlight, string(rune('a'+i)))
		}
		if ready {
			ro.Status.WaveReadyAt = &metav1.MicroTime{}
		}
		return ro
	}
	// Before begin: the baseline, not part of the rollout.
	rec.observe(&v1beta2.ModuleRollout{ObjectMeta: metav1.ObjectMeta{Name: rolloutName},
		Status: v1beta2.ModuleRolloutStatus{ToVersion: "2.0.0", Wave: -1, Phase: v1beta2.RolloutCompleted}})
	rec.begin("3.0.0")
	moved := time.Now()
	rec.observe(status(0, 2, false, v1beta2.RolloutProgressing))
	rec.observe(status(0, 0, true, v1beta2.RolloutProgressing))
	rec.observe(status(1, 4, false, v1beta2.RolloutProgressing))
	rec.observe(status(1, 3, false, v1beta2.RolloutProgressing))
	rec.observe(status(2, 4, false, v1beta2.RolloutProgressing)) // wave 1 Ready and no soak
	rec.observe(status(2, 0, false, v1beta2.RolloutCompleted))

	r := rec.figures(moved, 0)
	if len(r.Waves) != 3 {
		t.Fatalf("waves = %+v, want 3", r.Waves)
	}
	if got := []int{r.Waves[0].Kymas, r.Waves[1].Kymas, r.Waves[2].Kymas}; !slices.Equal(got, []int{2, 4, 4}) {
		t.Errorf("wave sizes = %v, want the in-flight count at admission [2 4 4]", got)
	}
	for i, w := range r.Waves {
		if w.ReadySeconds < w.StartSeconds || w.StartSeconds < 0 {
			t.Errorf("wave %d: admitted %v, Ready %v", i, w.StartSeconds, w.ReadySeconds)
		}
		if i > 0 && w.StartSeconds < r.Waves[i-1].ReadySeconds {
			t.Errorf("wave %d admitted at %v, before wave %d was Ready at %v", i, w.StartSeconds, i-1, r.Waves[i-1].ReadySeconds)
		}
	}
	if r.TotalSeconds < r.Waves[2].ReadySeconds || r.IdealSeconds > r.TotalSeconds {
		t.Errorf("total %v, ideal %v, last wave Ready at %v", r.TotalSeconds, r.IdealSeconds, r.Waves[2].ReadySeconds)
	}
	if math.Abs(r.TotalSeconds-r.IdealSeconds-r.OverheadSeconds) > 1e-9 || r.RatioToIdeal < 1 {
		t.Errorf("overhead %v, ratio %v for total %v and ideal %v", r.OverheadSeconds, r.RatioToIdeal, r.TotalSeconds, r.IdealSeconds)
	}

	// The soak counts into the ideal once between each two waves.
	withSoak := rec.figures(moved, 10*time.Second)
	if diff := withSoak.IdealSeconds - r.IdealSeconds; math.Abs(diff-20) > 1e-9 {
		t.Errorf("a 10s soak between 3 waves added %vs to the ideal, want 20s", diff)
	}

	// A halt is reported.
	rec.observe(&v1beta2.ModuleRollout{ObjectMeta: metav1.ObjectMeta{Name: rolloutName},
		Status: v1beta2.ModuleRolloutStatus{ToVersion: "3.0.0", Wave: 2, Phase: v1beta2.RolloutHalted, HaltReason: "2 of 10 failed", StartedAt: &metav1.Time{}}})
	if got := rec.figures(moved, 0).Halted; got != "2 of 10 failed" {
		t.Errorf("halted = %q", got)
	}
}

// The ideal at speed is each wave's Kymas at the measured Manifests per
// second, plus a soak between each two waves, whatever the waves took.
func TestRolloutIdealAtSpeed(t *testing.T) {
	r := &Rollout{TotalSeconds: 60, Waves: []Wave{{Kymas: 2, UpgradeSeconds: 1.5}, {Kymas: 20, UpgradeSeconds: 3}, {Kymas: 18, UpgradeSeconds: 2}}}
	r.atSpeed(10, "upgrade", 15*time.Second)
	if got := []float64{r.Waves[0].IdealSeconds, r.Waves[1].IdealSeconds, r.Waves[2].IdealSeconds}; !slices.Equal(got, []float64{0.2, 2, 1.8}) {
		t.Errorf("waves' ideal = %v, want [0.2 2 1.8]", got)
	}
	if math.Abs(r.IdealAtSpeedSeconds-34) > 1e-9 || math.Abs(r.RatioToIdealAtSpeed-60.0/34) > 1e-9 {
		t.Errorf("ideal %v, ratio %v; want 4 s of waves + 2 soaks of 15 s = 34 s, ratio %v", r.IdealAtSpeedSeconds, r.RatioToIdealAtSpeed, 60.0/34)
	}
	if r.ManifestsPerSecond != 10 || r.SpeedFrom != "upgrade" {
		t.Errorf("speed %v from %q", r.ManifestsPerSecond, r.SpeedFrom)
	}

	install := &Phase{Name: phaseInstall, Converged: true, Seconds: 50}
	upgrade := &Phase{Name: phaseUpgrade, Converged: false, Seconds: 30}
	if speed, from := manifestSpeed(1000, upgrade, install); speed != 20 || from != phaseInstall {
		t.Errorf("manifestSpeed = %v from %q, want 20 from the install (the upgrade did not converge)", speed, from)
	}
	none := &Rollout{}
	none.atSpeed(0, "", time.Second)
	if none.IdealAtSpeedSeconds != 0 {
		t.Errorf("without a speed the ideal is %v, want none", none.IdealAtSpeedSeconds)
	}
}

package rollout

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// rolloutGauges are the series recordMetrics sets.
var rolloutGauges = []prometheus.Collector{
	metrics.RolloutPhase, metrics.RolloutWave, metrics.RolloutRuntimes,
	metrics.RolloutHalted, metrics.RolloutRollingBack, metrics.RolloutLastProgress,
}

// newRollout is a rollout of module alpha's regular channel, named for
// the test so that runs (-count) and tests do not share series.
func newRollout(t *testing.T, status v1beta2.ModuleRolloutStatus) *v1beta2.ModuleRollout {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	t.Cleanup(func() { forgetMetrics(name) })
	return &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kcp-system"},
		Spec:       v1beta2.ModuleRolloutSpec{ModuleName: "alpha", Channel: "regular", SoakTime: metav1.Duration{Duration: 10 * time.Minute}},
		Status:     status,
	}
}

// seriesOf counts the series of the rollout among collectors'.
func seriesOf(g Gomega, rollout string, collectors ...prometheus.Collector) int {
	n := 0
	for _, c := range collectors {
		ch := make(chan prometheus.Metric, 100)
		c.Collect(ch)
		close(ch)
		for m := range ch {
			pb := &dto.Metric{}
			g.Expect(m.Write(pb)).To(Succeed())
			for _, l := range pb.GetLabel() {
				if l.GetName() == "rollout" && l.GetValue() == rollout {
					n++
				}
			}
		}
	}
	return n
}

func at(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// recordMetrics exports the status as the alerts and the dashboard read
// it: one series per phase, the wave, the runtimes by state, halted,
// rolling back and the last progress; a rollout not found loses them all.
func TestRecordMetricsExportsTheStatus(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	ro := newRollout(t, v1beta2.ModuleRolloutStatus{
		Phase: v1beta2.RolloutProgressing, FromVersion: "1.0.0", ToVersion: "1.1.0", Wave: 2,
		InFlight: []string{"kyma-a", "kyma-b"}, Done: 5, FailedCount: 1, Pending: 12, Total: 20,
		StartedAt: at(t0), WaveStartedAt: at(t0.Add(4 * time.Minute)),
	})
	recordMetricsAt(ro, t0.Add(5*time.Minute))

	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(rolloutGauges...)
	labels := `channel="regular",module="alpha",rollout="` + ro.Name + `"`
	want := strings.NewReplacer("LABELS", labels, "ROLLOUT", `rollout="`+ro.Name+`"`).Replace(`
# HELP lifecycle_manager_rollout_halted 1 while a ModuleRollout is halted (no wave starts until it is resumed or rolled back), else 0.
# TYPE lifecycle_manager_rollout_halted gauge
lifecycle_manager_rollout_halted{LABELS} 0
# HELP lifecycle_manager_rollout_last_progress_timestamp_seconds When a ModuleRollout last made progress (a runtime reached the new version, a wave started, the rollout started or resumed; a running soak counts as progress until it ends), in Unix seconds.
# TYPE lifecycle_manager_rollout_last_progress_timestamp_seconds gauge
lifecycle_manager_rollout_last_progress_timestamp_seconds{LABELS} 1.79629224e+09
# HELP lifecycle_manager_rollout_phase 1 for the current phase of a ModuleRollout (Completed, Progressing, Paused, Halted), 0 for the others.
# TYPE lifecycle_manager_rollout_phase gauge
lifecycle_manager_rollout_phase{channel="regular",module="alpha",phase="Completed",ROLLOUT} 0
lifecycle_manager_rollout_phase{channel="regular",module="alpha",phase="Halted",ROLLOUT} 0
lifecycle_manager_rollout_phase{channel="regular",module="alpha",phase="Paused",ROLLOUT} 0
lifecycle_manager_rollout_phase{channel="regular",module="alpha",phase="Progressing",ROLLOUT} 1
# HELP lifecycle_manager_rollout_rolling_back 1 while a ModuleRollout rolls its runtimes back to the earlier version (spec.rollback, not refused, not completed), else 0.
# TYPE lifecycle_manager_rollout_rolling_back gauge
lifecycle_manager_rollout_rolling_back{LABELS} 0
# HELP lifecycle_manager_rollout_runtimes Runtimes of a ModuleRollout by state: done (Ready at the new version), in_flight (in the current wave), failed, pending (waiting for a wave).
# TYPE lifecycle_manager_rollout_runtimes gauge
lifecycle_manager_rollout_runtimes{LABELS,state="done"} 5
lifecycle_manager_rollout_runtimes{LABELS,state="failed"} 1
lifecycle_manager_rollout_runtimes{LABELS,state="in_flight"} 2
lifecycle_manager_rollout_runtimes{LABELS,state="pending"} 12
# HELP lifecycle_manager_rollout_wave The wave of a ModuleRollout in flight or last finished: 0 is the canary, -1 none yet.
# TYPE lifecycle_manager_rollout_wave gauge
lifecycle_manager_rollout_wave{LABELS} 2
`)
	g.Expect(float64(t0.Add(4*time.Minute).Unix())).To(Equal(1.79629224e+09), "the wave's start, the newest time the status records")
	g.Expect(testutil.GatherAndCompare(registry, strings.NewReader(want))).To(Succeed())

	// Halted: the halt's own series and the phase say so.
	ro.Status.Phase, ro.Status.HaltReason = v1beta2.RolloutHalted, "2 of 20 runtimes failed"
	recordMetricsAt(ro, t0.Add(6*time.Minute))
	g.Expect(testutil.ToFloat64(metrics.RolloutHalted.WithLabelValues(ro.Name, "alpha", "regular"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(metrics.RolloutPhase.WithLabelValues(ro.Name, "alpha", "regular", "Halted"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(metrics.RolloutPhase.WithLabelValues(ro.Name, "alpha", "regular", "Progressing"))).To(Equal(0.0))

	// Gone: Reconcile reads NotFound, and every series of the rollout goes.
	g.Expect(seriesOf(g, ro.Name, rolloutGauges...)).To(Equal(12))
	forgetMetrics(ro.Name)
	g.Expect(seriesOf(g, ro.Name, rolloutGauges...)).To(BeZero())
}

// A mandatory module's rollout has no channel: its series have an empty
// channel label, and remain one set per rollout.
func TestRecordMetricsOfAMandatoryModule(t *testing.T) {
	g := NewWithT(t)
	ro := newRollout(t, v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutCompleted, ToVersion: "2.0.0", Wave: -1, Total: 3, Done: 3})
	ro.Spec.Channel = ""
	recordMetricsAt(ro, time.Now())
	g.Expect(testutil.ToFloat64(metrics.RolloutRuntimes.WithLabelValues(ro.Name, "alpha", "", "done"))).To(Equal(3.0))
	g.Expect(testutil.ToFloat64(metrics.RolloutWave.WithLabelValues(ro.Name, "alpha", ""))).To(Equal(-1.0))
	g.Expect(seriesOf(g, ro.Name, rolloutGauges...)).To(Equal(12))
}

// A rollback under way moves the fleet from the version rolled back from
// (status.rollback.of, the fromVersion then) to the earlier one, as the
// planner writes it.
func TestRollbackUnderWay(t *testing.T) {
	rollback := func(of, refused string) *v1beta2.RolloutRollback {
		return &v1beta2.RolloutRollback{By: "alice: 1.1.0 loses events", Of: of, Refused: refused}
	}
	tests := []struct {
		name   string
		status v1beta2.ModuleRolloutStatus
		want   bool
	}{
		{"no rollback", v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutProgressing, FromVersion: "1.0.0", ToVersion: "1.1.0"}, false},
		{"moving back", v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutProgressing, FromVersion: "1.1.0", ToVersion: "1.0.0", Rollback: rollback("1.1.0", "")}, true},
		{"paused while moving back", v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutPaused, FromVersion: "1.1.0", ToVersion: "1.0.0", Rollback: rollback("1.1.0", "")}, true},
		{"halted while moving back", v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutHalted, FromVersion: "1.1.0", ToVersion: "1.0.0", Rollback: rollback("1.1.0", "")}, true},
		{"rolled back", v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutCompleted, FromVersion: "1.1.0", ToVersion: "1.0.0", Rollback: rollback("1.1.0", "")}, false},
		{"refused", v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutHalted, FromVersion: "1.0.0", ToVersion: "1.1.0", Rollback: rollback("", "1.1.0 declares no rollbackTo")}, false},
		{"a later rollout, the rollback forgotten", v1beta2.ModuleRolloutStatus{Phase: v1beta2.RolloutProgressing, FromVersion: "1.0.0", ToVersion: "1.2.0", Rollback: rollback("", "")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rollbackUnderWay(tt.status); got != tt.want {
				t.Errorf("rollbackUnderWay = %v, want %v", got, tt.want)
			}
		})
	}
}

// The last progress moves with the done count, the wave, a resume and a
// soak (waiting on purpose), and not otherwise: a rollout whose in-flight
// runtimes never become Ready has a last progress that stays put.
func TestLastProgress(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	minute := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	ro := newRollout(t, v1beta2.ModuleRolloutStatus{
		Phase: v1beta2.RolloutProgressing, FromVersion: "1.0.0", ToVersion: "1.1.0", Wave: 0,
		InFlight: []string{"kyma-a"}, Pending: 9, Total: 10, StartedAt: at(t0), WaveStartedAt: at(t0),
	})
	lastAt := func(now time.Time) time.Time {
		recordMetricsAt(ro, now)
		return time.Unix(0, int64(testutil.ToFloat64(metrics.RolloutLastProgress.WithLabelValues(ro.Name, "alpha", "regular"))*1e9)).UTC().Round(time.Millisecond)
	}
	s := &ro.Status

	g.Expect(lastAt(minute(1))).To(Equal(t0), "first seen: the newest time the status records")
	g.Expect(lastAt(minute(30))).To(Equal(t0), "nothing moved")

	s.InFlight, s.Done, s.WaveReadyAt = nil, 1, &metav1.MicroTime{Time: minute(31)}
	g.Expect(lastAt(minute(31))).To(Equal(minute(31)), "the canary is done")
	g.Expect(lastAt(minute(35))).To(Equal(minute(35)), "soaking (10 minutes) is waiting on purpose")
	g.Expect(lastAt(minute(50))).To(Equal(minute(41)), "the soak ended at 41 and no wave started since")

	s.Wave, s.InFlight, s.Pending, s.WaveReadyAt, s.WaveStartedAt = 1, []string{"kyma-b", "kyma-c"}, 7, nil, at(minute(52))
	g.Expect(lastAt(minute(52))).To(Equal(minute(52)), "wave 1 started")
	g.Expect(lastAt(minute(90))).To(Equal(minute(52)), "its runtimes hang")

	s.Phase = v1beta2.RolloutHalted
	g.Expect(lastAt(minute(95))).To(Equal(minute(52)), "a halt is no progress")
	s.Phase, s.ResumedAt = v1beta2.RolloutProgressing, at(minute(100))
	g.Expect(lastAt(minute(100))).To(Equal(minute(100)), "resumed")

	s.InFlight, s.Done, s.WaveReadyAt = nil, 3, &metav1.MicroTime{Time: minute(101)}
	g.Expect(lastAt(minute(101))).To(Equal(minute(101)), "wave 1 is done")
	s.Runtimes.Pending = []v1beta2.RolloutRuntime{{Kyma: "kyma-d", Reason: "outside its maintenance window"}}
	g.Expect(lastAt(minute(200))).To(Equal(minute(111)), "7 pending, one named: some may move")
	s.Pending = 1
	g.Expect(lastAt(minute(300))).To(Equal(minute(300)), "the only runtime left cannot move now: waiting on purpose")

	// Another process (a new planner) sees the rollout for the first time.
	forgetMetrics(ro.Name)
	s.Pending, s.Runtimes.Pending = 7, nil
	g.Expect(lastAt(minute(400))).To(Equal(minute(111)), "first seen: the soak that ended last")
}

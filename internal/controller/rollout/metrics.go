package rollout

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// recordMetrics exports the rollout's status as metrics (internal/metrics,
// docs/rollouts.md "Watching a rollout").
func recordMetrics(rollout *v1beta2.ModuleRollout) {
	recordMetricsAt(rollout, time.Now())
}

// forgetMetrics deletes the metrics of a rollout that is gone: Reconcile
// calls it when it reads the rollout NotFound.
func forgetMetrics(name string) {
	progress.Lock()
	delete(progress.byName, name)
	progress.Unlock()
	metrics.ForgetRollout(name)
}

func recordMetricsAt(rollout *v1beta2.ModuleRollout, now time.Time) {
	s := rollout.Status
	metrics.SetRollout(metrics.Rollout{
		Name: rollout.Name, Module: rollout.Spec.ModuleName, Channel: rollout.Spec.Channel,
		Phase: s.Phase, Wave: s.Wave,
		Done: s.Done, InFlight: int32(len(s.InFlight)), Failed: s.FailedCount, Pending: s.Pending,
		Halted:       s.Phase == v1beta2.RolloutHalted,
		RollingBack:  rollbackUnderWay(s),
		LastProgress: lastProgress(rollout, now),
	})
}

// rollbackUnderWay tells whether a rollback is under way: one was acted on and
// not refused, the rollout moves the fleet from the version rolled back
// from (Of, which the planner drops once the channel points to another
// version) to an earlier one, and has not completed that.
func rollbackUnderWay(s v1beta2.ModuleRolloutStatus) bool {
	rb := s.Rollback
	return rb != nil && rb.Refused == "" && rb.Of != "" && rb.Of != s.ToVersion && s.Phase != v1beta2.RolloutCompleted
}

// progress remembers, per rollout, the progress last seen and when it was
// first seen: the status has no time for the done count's last change.
var progress = struct {
	sync.Mutex
	byName map[string]progressSeen
}{byName: map[string]progressSeen{}}

type progressSeen struct {
	toVersion  string
	wave, done int32
	phase      v1beta2.RolloutPhase
	at         time.Time
}

// lastProgress is when the rollout last made progress, for the alert on a
// rollout that stopped moving (LifecycleManagerRolloutNoProgress). Progress
// is a change of the done count, the wave or the version, and the rollout
// (re)starting to move: started, resumed, unpaused. Waiting on purpose
// counts as progress while it lasts: a running soak (until it ends), and
// a rollout whose only runtimes left cannot move now (paused, hibernated,
// outside their maintenance window). The first time this process sees a
// rollout, the last progress is the newest time its status records.
func lastProgress(rollout *v1beta2.ModuleRollout, now time.Time) time.Time {
	s := rollout.Status
	progress.Lock()
	seen, known := progress.byName[rollout.Name]
	at := seen.at
	switch {
	case !known:
		at = newestRecorded(s, now)
	case seen.toVersion != s.ToVersion || seen.wave != s.Wave || seen.done != s.Done:
		at = now
	case s.Phase == v1beta2.RolloutProgressing && seen.phase != v1beta2.RolloutProgressing:
		at = now
	}
	progress.byName[rollout.Name] = progressSeen{toVersion: s.ToVersion, wave: s.Wave, done: s.Done, phase: s.Phase, at: at}
	progress.Unlock()

	if s.Phase != v1beta2.RolloutProgressing || len(s.InFlight) > 0 {
		return at
	}
	if s.WaveReadyAt != nil {
		if soakEnd := s.WaveReadyAt.Add(rollout.Spec.SoakTime.Duration); soakEnd.After(at) {
			at = minTime(now, soakEnd)
		}
	}
	if onlyBlockedLeft(s) {
		at = now
	}
	return at
}

// onlyBlockedLeft tells whether every runtime still pending is named with
// a reason it cannot move now.
func onlyBlockedLeft(s v1beta2.ModuleRolloutStatus) bool {
	if s.Pending == 0 || int(s.Pending) != len(s.Runtimes.Pending) {
		return false
	}
	for _, rt := range s.Runtimes.Pending {
		if rt.Reason == "" {
			return false
		}
	}
	return true
}

// newestRecorded is the newest time the status records of the rollout's
// progress, or now when it records none.
func newestRecorded(s v1beta2.ModuleRolloutStatus, now time.Time) time.Time {
	var newest time.Time
	for _, t := range []*time.Time{timeOf(s.StartedAt), timeOf(s.WaveStartedAt), microTimeOf(s.WaveReadyAt), timeOf(s.ResumedAt), timeOf(s.CompletedAt)} {
		if t != nil && t.After(newest) {
			newest = *t
		}
	}
	if s.Rollback != nil && s.Rollback.At.After(newest) {
		newest = s.Rollback.At.Time
	}
	if newest.IsZero() {
		return now
	}
	return newest
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

func microTimeOf(t *metav1.MicroTime) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

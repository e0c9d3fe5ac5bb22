package rollout

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Runtime is one runtime in a rollout, as the control plane sees it: its
// Kyma and that Kyma's Manifest of the module.
type Runtime struct {
	Kyma   string
	Labels map[string]string
	// Version is the Manifest's spec.version: what the Kyma controller
	// asked the runtime to have.
	Version string
	// State is the Manifest's state, for Version when Current.
	State v1beta2.State
	// Current says that the Manifest's status describes its spec (its
	// observed generation is its generation).
	Current bool
	// Blocked says why the runtime cannot move now (its Kyma is paused or
	// hibernated, or outside its maintenance window); empty when it can.
	Blocked string
	// AnalysisFailed says which of the rollout's analyses the runtime
	// failed, and how; AnalysisInconclusive why they could not be
	// evaluated for it. Analysed says the analyses ran for it; they run
	// only for members of a wave that has none in flight.
	AnalysisFailed       string
	AnalysisInconclusive string
	Analysed             bool
}

// Channel is what the module's channel says now.
type Channel struct {
	// Version the channel points to.
	Version string
	// Template is namespace/name@revision of the version's ModuleTemplate.
	Template string
}

// maxNamedFailures bounds the failed Kymas the status names.
const maxNamedFailures = 20

// Plan is the pure rule of a rollout: from the last status, what the
// channel says, and the runtimes, the next status and when to look again
// (zero: when something changes). It admits a wave only when the previous
// one is Ready and soaked, never more than one at once, and none while the
// rollout is paused or halted.
func Plan(spec v1beta2.ModuleRolloutSpec, last v1beta2.ModuleRolloutStatus, channel Channel, runtimes []Runtime, now time.Time) (v1beta2.ModuleRolloutStatus, time.Duration, error) {
	next := *last.DeepCopy()
	if channel.Version == "" {
		return next, 0, fmt.Errorf("channel %q of module %s points to no version", spec.Channel, spec.ModuleName)
	}
	switch {
	case next.ToVersion == "":
		// First sight: the channel's version is where the fleet stands.
		next = v1beta2.ModuleRolloutStatus{ToVersion: channel.Version, Template: channel.Template, Wave: -1, Phase: v1beta2.RolloutCompleted}
	case next.ToVersion != channel.Version:
		next = v1beta2.ModuleRolloutStatus{
			FromVersion: next.ToVersion, ToVersion: channel.Version, Template: channel.Template,
			Wave: -1, Phase: v1beta2.RolloutProgressing, StartedAt: &metav1.Time{Time: now},
			// The last resume acted on stays: it must not resume a halt of
			// the new version.
			ResumedBy: last.ResumedBy, ResumedAt: last.ResumedAt,
		}
	}
	// A resume is acted on once, whatever the phase, so that a value set
	// while the rollout runs cannot resume a later halt.
	resumed := false
	if spec.Resume != "" && spec.Resume != last.ResumedBy {
		resumed = last.Phase == v1beta2.RolloutHalted && next.ToVersion == last.ToVersion
		next.ResumedBy, next.ResumedAt = spec.Resume, &metav1.Time{Time: now}
	}

	count := classify(next.ToVersion, next.InFlight, runtimes)
	deadlineIn := count.pastDeadline(spec.ProgressDeadline.Duration, next.WaveStartedAt, now)
	next.Total = int32(len(runtimes))
	next.Done = int32(len(count.done))
	next.FailedCount = int32(len(count.failed))
	next.Pending = int32(len(count.pending))
	next.InFlight = count.inFlight
	next.Failed = count.failed[:min(len(count.failed), maxNamedFailures)]
	next.HaltReason = ""

	if next.Phase == v1beta2.RolloutCompleted && next.StartedAt == nil {
		return next, 0, nil // nothing moved since this policy was created
	}
	if channel.Template != next.Template {
		next.Phase = v1beta2.RolloutHalted
		next.HaltReason = fmt.Sprintf("the ModuleTemplate of %s changed during the rollout (%s, was %s): waves would not get the same content. "+
			"Publish the change as a new version and point the channel at it", next.ToVersion, channel.Template, next.Template)
		return next, 0, nil
	}
	allowed, err := scaled(spec.MaxFailures, len(runtimes), false)
	if err != nil {
		return next, 0, fmt.Errorf("maxFailures: %w", err)
	}
	if len(count.failed) > allowed {
		next.Phase = v1beta2.RolloutHalted
		next.HaltReason = fmt.Sprintf("%d of %d runtimes failed at %s, more than maxFailures allows (%d): %s",
			len(count.failed), len(runtimes), next.ToVersion, allowed, strings.Join(next.Failed, ", "))
		if len(count.late) > 0 {
			next.HaltReason += fmt.Sprintf("; %s did not become Ready within progressDeadline (%s)",
				strings.Join(count.late[:min(len(count.late), maxNamedFailures)], ", "), spec.ProgressDeadline.Duration)
		}
		return next, 0, nil
	}
	if last.Phase == v1beta2.RolloutHalted && next.ToVersion == last.ToVersion && !resumed && !spec.AutoResume {
		// Halts are sticky: the failed runtimes recovering is no reason to
		// go on by itself; someone resumes (spec.resume), or opts into
		// autoResume. The counts stay current, the reason is the halt's.
		next.Phase, next.HaltReason = v1beta2.RolloutHalted, last.HaltReason
		return next, 0, nil
	}
	if len(count.inFlight) > 0 {
		// Not Ready, or Ready again only after a while: a soak counts
		// from when the whole wave is Ready.
		next.WaveReadyAt = nil
		next.Phase = phaseUnlessPaused(spec)
		return next, deadlineIn, nil
	}
	if next.WaveReadyAt != nil && healthChanged(last.Failed, count.failed) {
		// A runtime failed (within maxFailures) or recovered during the
		// soak: the wave has not been steady for soakTime; soak again.
		next.WaveReadyAt = &metav1.MicroTime{Time: now}
	}
	if len(count.pending) == 0 {
		if next.Phase != v1beta2.RolloutCompleted {
			next.Phase = v1beta2.RolloutCompleted
			next.CompletedAt = &metav1.Time{Time: now}
		}
		return next, 0, nil
	}
	// The wave is Ready (or none started): soak, then the next wave.
	if next.Wave >= 0 {
		if next.WaveReadyAt == nil {
			next.WaveReadyAt = &metav1.MicroTime{Time: now}
		}
		if soakLeft := next.WaveReadyAt.Add(spec.SoakTime.Duration).Sub(now); soakLeft > 0 {
			next.Phase = phaseUnlessPaused(spec)
			return next, soakLeft, nil
		}
	}
	if spec.Paused {
		next.Phase = v1beta2.RolloutPaused
		return next, 0, nil
	}
	wave, err := nextWave(spec, next.Wave, count.pending, len(runtimes))
	if err != nil {
		return next, 0, err
	}
	if len(wave) == 0 {
		// Only a canary wave can come out empty: no pending runtime
		// matches its selector. Going on without one is what the policy
		// forbids.
		next.Phase = v1beta2.RolloutHalted
		next.HaltReason = "no runtime waiting for the new version matches canary.selector; label canary Kymas, or change the selector"
		return next, 0, nil
	}
	next.Phase = v1beta2.RolloutProgressing
	next.Wave++
	next.InFlight = wave
	next.Pending -= int32(len(wave))
	next.WaveStartedAt = &metav1.Time{Time: now}
	next.WaveReadyAt = nil
	next.CompletedAt = nil
	return next, 0, nil
}

func phaseUnlessPaused(spec v1beta2.ModuleRolloutSpec) v1beta2.RolloutPhase {
	if spec.Paused {
		return v1beta2.RolloutPaused
	}
	return v1beta2.RolloutProgressing
}

// healthChanged tells whether the failed runtimes differ from those the
// last status named: one failed, or one recovered.
func healthChanged(lastFailed, failed []string) bool {
	named := failed[:min(len(failed), maxNamedFailures)]
	return !slices.Equal(lastFailed, named)
}

type classified struct {
	done, inFlight, failed []string
	pending                []Runtime
	// late are the runtimes in flight past the wave's progress deadline;
	// they are among failed.
	late []string
}

// pastDeadline counts the runtimes in flight as failed (late) once the
// wave started more than deadline ago, and otherwise says how long until
// it ends (zero: no deadline, or none in flight).
func (c *classified) pastDeadline(deadline time.Duration, waveStarted *metav1.Time, now time.Time) time.Duration {
	if deadline <= 0 || waveStarted == nil || len(c.inFlight) == 0 {
		return 0
	}
	if left := waveStarted.Add(deadline).Sub(now); left > 0 {
		return left
	}
	c.late, c.inFlight = c.inFlight, nil
	c.failed = append(c.failed, c.late...)
	slices.Sort(c.failed)
	return 0
}

// classify sorts the runtimes by where they stand towards version: done
// (Ready at it), failed (Error at it), in flight (admitted, on the way),
// pending (not admitted). A runtime already past version (the channel
// moved back, and downgrades are refused) counts as done.
func classify(version string, admitted []string, runtimes []Runtime) classified {
	var c classified
	for _, rt := range runtimes {
		switch {
		case rt.Version == version && rt.Current && rt.State == v1beta2.StateReady:
			c.done = append(c.done, rt.Kyma)
		case rt.Version == version && rt.Current && rt.State == v1beta2.StateError:
			c.failed = append(c.failed, rt.Kyma)
		case rt.Version == version || slices.Contains(admitted, rt.Kyma):
			c.inFlight = append(c.inFlight, rt.Kyma)
		case newer(rt.Version, version):
			c.done = append(c.done, rt.Kyma)
		default:
			c.pending = append(c.pending, rt)
		}
	}
	slices.Sort(c.inFlight)
	slices.Sort(c.failed)
	return c
}

// nextWave picks the next wave from the pending runtimes: the canary wave
// first (wave -1 → 0) when the policy has one, else maxInFlight of them.
// Within a wave's candidates the order is a hash of the Kyma's name:
// stable across reconciles and restarts, and spread over the fleet rather
// than alphabetical.
func nextWave(spec v1beta2.ModuleRolloutSpec, wave int32, pending []Runtime, total int) ([]string, error) {
	candidates := pending
	size := spec.MaxInFlight
	if wave < 0 && spec.Canary != nil {
		size = spec.Canary.Count
		if spec.Canary.Selector != nil {
			selector, err := metav1.LabelSelectorAsSelector(spec.Canary.Selector)
			if err != nil {
				return nil, fmt.Errorf("canary.selector: %w", err)
			}
			candidates = nil
			for _, rt := range pending {
				if selector.Matches(labels.Set(rt.Labels)) {
					candidates = append(candidates, rt)
				}
			}
		}
	}
	n, err := scaled(size, total, true)
	if err != nil {
		return nil, err
	}
	ordered := slices.Clone(candidates)
	slices.SortFunc(ordered, func(a, b Runtime) int {
		return cmp.Or(cmp.Compare(hashOf(a.Kyma), hashOf(b.Kyma)), cmp.Compare(a.Kyma, b.Kyma))
	})
	names := make([]string, 0, min(n, len(ordered)))
	for _, rt := range ordered[:min(n, len(ordered))] {
		names = append(names, rt.Kyma)
	}
	slices.Sort(names)
	return names, nil
}

// scaled is a count or a percentage of total; a wave size (roundUp) is at
// least one.
func scaled(v intstr.IntOrString, total int, roundUp bool) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, roundUp)
	if err != nil {
		return 0, err
	}
	if roundUp {
		n = max(n, 1)
	}
	return n, nil
}

func hashOf(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// newer tells whether version a is higher than b; versions that do not
// parse are not.
func newer(a, b string) bool {
	va, errA := semver.StrictNewVersion(a)
	vb, errB := semver.StrictNewVersion(b)
	return errA == nil && errB == nil && va.GreaterThan(vb)
}

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
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// Runtime is one runtime in a rollout, as the control plane sees it: its
// Kyma and that Kyma's Manifest of the module.
type Runtime struct {
	Kyma   string
	Labels map[string]string
	// Version is the Manifest's spec.version: what the Kyma controller
	// asked the runtime to have.
	Version string
	// State is the Manifest's state, for Version when Current; Message its
	// Ready condition's message.
	State   v1beta2.State
	Message string
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

// Channel is what the module's channel (or its mandatory version) says
// now, and what the catalog knows of the module's other versions.
type Channel struct {
	// Version the channel points to.
	Version string
	// Template is namespace/name@revision of the version's ModuleTemplate.
	Template string
	// Releases are the module's published versions, by version.
	Releases map[string]Release

	// ContentOf is the version whose content links Content holds, pinned
	// by digest lately; PinErr says why pinning them failed. A wave starts
	// only when the rollout's version was pinned without error.
	ContentOf string
	Content   []v1beta2.ContentResource
	PinErr    error
}

// Release is one published version of a module.
type Release struct {
	// Template is namespace/name@revision of its ModuleTemplate.
	Template string
	// RollbackTo are the constraints of the versions it may go back to
	// (the template's spec.rollbackTo).
	RollbackTo []string
}

// maxNamed bounds the runtimes the status names in each list.
const maxNamed = 20

// Plan is the pure rule of a rollout: from the last status, what the
// channel says, and the runtimes, the next status and when to look again
// (zero: when something changes). It admits a wave only when the previous
// one is Ready, soaked and analysed, never more than one at once, and none
// while the rollout is paused or halted.
func Plan(spec v1beta2.ModuleRolloutSpec, last v1beta2.ModuleRolloutStatus, channel Channel, runtimes []Runtime, now time.Time) (v1beta2.ModuleRolloutStatus, time.Duration, error) {
	next := *last.DeepCopy()
	if channel.Version == "" {
		return next, 0, fmt.Errorf("channel %q of module %s points to no version", spec.Channel, spec.ModuleName)
	}
	target, template := channel.Version, channel.Template
	if rollingBack(next, channel.Version) {
		// The channel still points to the version rolled back from; the
		// rollout holds the fleet at the one it went back to.
		target, template = next.ToVersion, channel.Releases[next.ToVersion].Template
	}
	switch {
	case next.ToVersion == "":
		// First sight: the channel's version is where the fleet stands.
		next = v1beta2.ModuleRolloutStatus{ToVersion: target, Template: template, Wave: -1, Phase: v1beta2.RolloutCompleted}
	case next.ToVersion != target:
		next = v1beta2.ModuleRolloutStatus{
			FromVersion: next.ToVersion, ToVersion: target, Template: template,
			Wave: -1, Phase: v1beta2.RolloutProgressing, StartedAt: &metav1.Time{Time: now},
			// The last resume and rollback acted on stay: they must not
			// act again on the new version.
			ResumedBy: last.ResumedBy, ResumedAt: last.ResumedAt, Rollback: forgotten(last.Rollback),
		}
	}
	// A resume is acted on once, whatever the phase, so that a value set
	// while the rollout runs cannot resume a later halt.
	resumed := false
	if spec.Resume != "" && spec.Resume != last.ResumedBy {
		resumed = last.Phase == v1beta2.RolloutHalted && next.ToVersion == last.ToVersion
		next.ResumedBy, next.ResumedAt = spec.Resume, &metav1.Time{Time: now}
	}
	if spec.Rollback != "" && (next.Rollback == nil || spec.Rollback != next.Rollback.By) {
		next = rollBack(spec, next, channel, now)
		if rollingBack(next, channel.Version) {
			template = next.Template
		}
	}

	count := classify(next.ToVersion, next.InFlight, runtimes, channel.Releases)
	deadlineIn := count.pastDeadline(spec.ProgressDeadline.Duration, next.WaveStartedAt, now)
	next.Total = int32(len(runtimes))
	next.Done = int32(len(count.done))
	next.FailedCount = int32(len(count.failed))
	next.Pending = int32(len(count.pending))
	next.InFlight = count.inFlight
	next.Failed = names(count.failed)
	next.Runtimes = count.listed()
	next.HaltReason = ""
	if next.Phase == v1beta2.RolloutCompleted && next.StartedAt == nil {
		next.Content = contentOf(next, channel)
		return next, 0, nil // nothing moved since this policy was created
	}

	if template != next.Template {
		return halt(next, fmt.Sprintf("the ModuleTemplate of %s changed during the rollout (%s, was %s): waves would not get the same content. "+
			"Publish the change as a new version and point the channel at it", next.ToVersion, cmp.Or(template, "none"), next.Template)), 0, nil
	}
	if moved := contentMoved(next, channel); moved != "" {
		return halt(next, moved), 0, nil
	}
	next.Content = contentOf(next, channel)
	if len(count.noReturn) > 0 {
		return halt(next, fmt.Sprintf("%s %s at %s, which does not list %s in its ModuleTemplate's spec.rollbackTo: they stay at %s, as no module goes back "+
			"to a version its module team did not declare safe (SPEC R1). Point the channel at %s or later, or publish %s with rollbackTo",
			joinNamed(count.noReturn), isOrAre(len(count.noReturn)), count.noReturnFrom, next.ToVersion, count.noReturnFrom, count.noReturnFrom, count.noReturnFrom)), 0, nil
	}
	allowed, err := scaled(spec.MaxFailures, len(runtimes), false)
	if err != nil {
		return next, 0, fmt.Errorf("maxFailures: %w", err)
	}
	if len(count.failed) > allowed {
		reasons := make([]string, 0, min(len(count.failed), maxNamed))
		for _, f := range count.failed[:min(len(count.failed), maxNamed)] {
			reasons = append(reasons, f.Kyma+" ("+f.Reason+")")
		}
		return halt(next, fmt.Sprintf("%d of %d runtimes failed at %s, more than maxFailures allows (%d): %s",
			len(count.failed), len(runtimes), next.ToVersion, allowed, strings.Join(reasons, ", "))), 0, nil
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
	if next.WaveReadyAt != nil && healthChanged(last.Failed, next.Failed) {
		// A runtime failed (within maxFailures) or recovered during the
		// soak: the wave has not been steady for soakTime; soak again.
		next.WaveReadyAt = &metav1.MicroTime{Time: now}
	}
	if next.Wave >= 0 && next.WaveReadyAt == nil {
		next.WaveReadyAt = &metav1.MicroTime{Time: now}
	}
	if unanalysed, notYet := count.unanalysed(spec, next.WaveMembers); unanalysed != "" {
		// The wave passes only once its analyses did, the last one too:
		// analysed at the next look, or, when inconclusive, again at the
		// controller's poll.
		next.Phase = phaseUnlessPaused(spec)
		if notYet {
			return next, time.Second, nil
		}
		return next, 0, nil
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
		if soakLeft := next.WaveReadyAt.Add(spec.SoakTime.Duration).Sub(now); soakLeft > 0 {
			next.Phase = phaseUnlessPaused(spec)
			return next, soakLeft, nil
		}
	}
	if spec.Paused {
		next.Phase = v1beta2.RolloutPaused
		return next, 0, nil
	}
	if channel.ContentOf != next.ToVersion || channel.PinErr != nil {
		// Every wave gets the bytes pinned at the start; a wave starts
		// only once they were checked lately. A version just rolled back
		// to is pinned at the next look; a pin that failed is retried.
		next.Phase = v1beta2.RolloutProgressing
		if channel.PinErr == nil {
			return next, time.Second, nil
		}
		return next, 0, nil
	}
	wave, err := nextWave(spec, next.Wave, count.pending, len(runtimes))
	if err != nil {
		return next, 0, err
	}
	if wave == nil {
		// Only a canary wave can come out empty: no pending runtime
		// matches its selector. Going on without one is what the policy
		// forbids.
		return halt(next, "no runtime waiting for the new version matches canary.selector; label canary Kymas, or change the selector"), 0, nil
	}
	if len(wave) == 0 {
		// Every runtime that may go next cannot move now: wait for them,
		// named with their reasons in status.runtimes.pending.
		next.Phase = phaseUnlessPaused(spec)
		return next, 0, nil
	}
	next.Phase = v1beta2.RolloutProgressing
	next.Wave++
	next.InFlight = wave
	next.WaveMembers = wave
	next.Pending -= int32(len(wave))
	next.Runtimes.Pending = slices.DeleteFunc(next.Runtimes.Pending, func(p v1beta2.RolloutRuntime) bool { return slices.Contains(wave, p.Kyma) })
	next.WaveStartedAt = &metav1.Time{Time: now}
	next.WaveReadyAt = nil
	next.CompletedAt = nil
	return next, 0, nil
}

// rollingBack tells whether the rollout holds the fleet at the version
// spec.rollback took it back to while channel still points to the version
// rolled back from.
func rollingBack(s v1beta2.ModuleRolloutStatus, channel string) bool {
	return s.Rollback != nil && s.Rollback.Refused == "" && s.Rollback.Of == channel && s.Rollback.Of != s.ToVersion
}

// forgotten keeps the record of the last rollback acted on, so that the
// same spec.rollback does not act again, without its effect: a new
// version of the channel ends what it did.
func forgotten(rb *v1beta2.RolloutRollback) *v1beta2.RolloutRollback {
	if rb == nil {
		return nil
	}
	return &v1beta2.RolloutRollback{By: rb.By, At: rb.At, Refused: rb.Refused}
}

// rollBack acts on a new spec.rollback: the runtimes that moved go back to
// fromVersion in waves, or the rollback is refused with the reason.
func rollBack(spec v1beta2.ModuleRolloutSpec, s v1beta2.ModuleRolloutStatus, channel Channel, now time.Time) v1beta2.ModuleRolloutStatus {
	rb := &v1beta2.RolloutRollback{By: spec.Rollback, At: metav1.Time{Time: now}, Of: s.ToVersion}
	refuse := func(why string) v1beta2.ModuleRolloutStatus {
		rb.Refused, rb.Of = why, ""
		s.Rollback = rb
		return s
	}
	switch {
	case s.FromVersion == "":
		return refuse(fmt.Sprintf("this rollout has not moved the fleet from another version to %s: there is nothing to roll back to", s.ToVersion))
	case rollingBack(s, channel.Version):
		return refuse(fmt.Sprintf("the rollout already rolled back from %s to %s", s.Rollback.Of, s.ToVersion))
	case s.ToVersion != channel.Version:
		return refuse(fmt.Sprintf("the channel points to %s, not to %s: move the channel instead", channel.Version, s.ToVersion))
	}
	back, ok := channel.Releases[s.FromVersion]
	if !ok {
		return refuse(fmt.Sprintf("%s is no longer published (no ModuleTemplate): publish it again to roll back to it", s.FromVersion))
	}
	if !mayReturn(channel.Releases[s.ToVersion], s.FromVersion) {
		return refuse(fmt.Sprintf("%s does not list %s in its ModuleTemplate's spec.rollbackTo: going back would be a downgrade its module team did not declare safe (SPEC R1). "+
			"Publish %s with rollbackTo, or move the channel to a fixed version", s.ToVersion, s.FromVersion, s.ToVersion))
	}
	return v1beta2.ModuleRolloutStatus{
		FromVersion: s.ToVersion, ToVersion: s.FromVersion, Template: back.Template,
		Wave: -1, Phase: v1beta2.RolloutProgressing, StartedAt: &metav1.Time{Time: now},
		ResumedBy: s.ResumedBy, ResumedAt: s.ResumedAt, Rollback: rb, PlannedAt: s.PlannedAt,
	}
}

// mayReturn tells whether a runtime at release may go back to version.
func mayReturn(release Release, version string) bool {
	return resolve.MayRollBack(release.RollbackTo, version)
}

// contentMoved says how the content pinned at the rollout's start and the
// content its links resolve to now differ, or "" when they do not (or it
// was not read now, or nothing was pinned yet).
func contentMoved(s v1beta2.ModuleRolloutStatus, channel Channel) string {
	if len(s.Content) == 0 || channel.ContentOf != s.ToVersion || channel.PinErr != nil {
		return ""
	}
	for _, pinned := range s.Content {
		for _, now := range channel.Content {
			if now.Name == pinned.Name && now.Link != pinned.Link {
				return fmt.Sprintf("the content of %s changed during the rollout: %s now resolves to %s, the rollout pinned %s at its start. "+
					"Waves keep getting the pinned bytes; publish the change as a new version and point the channel at it",
					s.ToVersion, pinned.Name, now.Link, pinned.Link)
			}
		}
	}
	return ""
}

// contentOf is the rollout's pinned content: kept once pinned, else what
// was pinned now for its version.
func contentOf(s v1beta2.ModuleRolloutStatus, channel Channel) []v1beta2.ContentResource {
	if len(s.Content) > 0 || channel.ContentOf != s.ToVersion || channel.PinErr != nil {
		return s.Content
	}
	return slices.Clone(channel.Content)
}

func halt(s v1beta2.ModuleRolloutStatus, reason string) v1beta2.ModuleRolloutStatus {
	s.Phase, s.HaltReason = v1beta2.RolloutHalted, reason
	return s
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
	return !slices.Equal(lastFailed, failed)
}

type classified struct {
	done, inFlight []string
	failed         []v1beta2.RolloutRuntime
	pending        []Runtime
	// blockedInFlight are runtimes in flight that cannot move now; past
	// the deadline they go back to pending rather than fail.
	blockedInFlight map[string]Runtime
	// noReturn are runtimes at a later version, noReturnFrom, that may not
	// go back to the rollout's.
	noReturn     []string
	noReturnFrom string
	// analyses are the done runtimes' analysis outcomes, by Kyma.
	analyses map[string]Runtime
}

// pastDeadline counts the runtimes in flight as failed (late) once the
// wave started more than deadline ago, and otherwise says how long until
// it ends (zero: no deadline, or none in flight). A runtime in flight that
// cannot move now goes back to pending instead.
func (c *classified) pastDeadline(deadline time.Duration, waveStarted *metav1.Time, now time.Time) time.Duration {
	if deadline <= 0 || waveStarted == nil || len(c.inFlight) == 0 {
		return 0
	}
	if left := waveStarted.Add(deadline).Sub(now); left > 0 {
		return left
	}
	for _, kyma := range c.inFlight {
		if rt, blocked := c.blockedInFlight[kyma]; blocked {
			c.pending = append(c.pending, rt)
			continue
		}
		c.failed = append(c.failed, v1beta2.RolloutRuntime{Kyma: kyma, Reason: fmt.Sprintf("not Ready within progressDeadline (%s)", deadline)})
	}
	c.inFlight = nil
	slices.SortFunc(c.failed, byKyma)
	return 0
}

// unanalysed says which member of the wave that is done has not passed
// the rollout's analyses yet, and why ("" when all have, or there are
// none), and whether one was not analysed at all yet (rather than
// inconclusive).
func (c *classified) unanalysed(spec v1beta2.ModuleRolloutSpec, members []string) (string, bool) {
	if len(spec.Analysis) == 0 {
		return "", false
	}
	why := ""
	for _, kyma := range members {
		rt, done := c.analyses[kyma]
		switch {
		case !done:
		case !rt.Analysed:
			return kyma + ": not analysed yet", true
		case rt.AnalysisInconclusive != "" && why == "":
			why = kyma + ": " + rt.AnalysisInconclusive
		}
	}
	return why, false
}

// listed names the runtimes by state for the status, at most maxNamed of
// each; pending runtimes that cannot move now come first.
func (c *classified) listed() v1beta2.RolloutRuntimes {
	pending := make([]v1beta2.RolloutRuntime, 0, len(c.pending))
	for _, rt := range c.pending {
		pending = append(pending, v1beta2.RolloutRuntime{Kyma: rt.Kyma, Reason: rt.Blocked})
	}
	slices.SortFunc(pending, func(a, b v1beta2.RolloutRuntime) int {
		if blockedA, blockedB := a.Reason != "", b.Reason != ""; blockedA != blockedB {
			if blockedA {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Kyma, b.Kyma)
	})
	return v1beta2.RolloutRuntimes{
		Done:    c.done[:min(len(c.done), maxNamed)],
		Failed:  c.failed[:min(len(c.failed), maxNamed)],
		Pending: pending[:min(len(pending), maxNamed)],
	}
}

// classify sorts the runtimes by where they stand towards version: done
// (Ready at it, and passed the analyses run for it), failed (Error at it,
// or failed an analysis), in flight (admitted, on the way), pending (not
// admitted). A runtime at a later version is pending when that version may
// go back to this one, and may not move otherwise (noReturn).
func classify(version string, admitted []string, runtimes []Runtime, releases map[string]Release) classified {
	c := classified{blockedInFlight: map[string]Runtime{}, analyses: map[string]Runtime{}}
	for _, rt := range runtimes {
		at := rt.Version == version && rt.Current
		switch {
		case at && rt.State == v1beta2.StateReady && rt.AnalysisFailed != "":
			c.failed = append(c.failed, v1beta2.RolloutRuntime{Kyma: rt.Kyma, Reason: "analysis " + rt.AnalysisFailed})
		case at && rt.State == v1beta2.StateReady:
			c.done = append(c.done, rt.Kyma)
			c.analyses[rt.Kyma] = rt
		case at && rt.State == v1beta2.StateError:
			c.failed = append(c.failed, v1beta2.RolloutRuntime{Kyma: rt.Kyma, Reason: errorReason(version, rt.Message)})
		case rt.Version == version || slices.Contains(admitted, rt.Kyma):
			c.inFlight = append(c.inFlight, rt.Kyma)
			if rt.Blocked != "" && rt.Version != version {
				c.blockedInFlight[rt.Kyma] = rt
			}
		case newer(rt.Version, version) && !mayReturn(releases[rt.Version], version):
			c.noReturn = append(c.noReturn, rt.Kyma)
			c.noReturnFrom = rt.Version
		default:
			c.pending = append(c.pending, rt)
		}
	}
	slices.Sort(c.inFlight)
	slices.SortFunc(c.failed, byKyma)
	return c
}

// maxReasonLength bounds a runtime's reason in the status.
const maxReasonLength = 200

func errorReason(version, message string) string {
	reason := "Error at " + version
	if message != "" {
		reason += ": " + message
	}
	if len(reason) > maxReasonLength {
		reason = reason[:maxReasonLength-1] + "…"
	}
	return reason
}

func byKyma(a, b v1beta2.RolloutRuntime) int { return cmp.Compare(a.Kyma, b.Kyma) }

func names(rts []v1beta2.RolloutRuntime) []string {
	out := make([]string, 0, min(len(rts), maxNamed))
	for _, rt := range rts[:min(len(rts), maxNamed)] {
		out = append(out, rt.Kyma)
	}
	return out
}

func joinNamed(kymas []string) string {
	if len(kymas) <= maxNamed {
		return strings.Join(kymas, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(kymas[:maxNamed], ", "), len(kymas)-maxNamed)
}

func isOrAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// nextWave picks the next wave from the pending runtimes that can move
// now: the canary wave first (wave -1 → 0) when the policy has one, else
// maxInFlight of them. It is nil when the canary selector matches no
// pending runtime, and empty when those that would go cannot move now.
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
			if len(candidates) == 0 {
				return nil, nil
			}
		}
	}
	n, err := scaled(size, total, true)
	if err != nil {
		return nil, err
	}
	movable := slices.DeleteFunc(slices.Clone(candidates), func(rt Runtime) bool { return rt.Blocked != "" })
	slices.SortFunc(movable, func(a, b Runtime) int {
		return cmp.Or(cmp.Compare(hashOf(a.Kyma), hashOf(b.Kyma)), cmp.Compare(a.Kyma, b.Kyma))
	})
	names := make([]string, 0, min(n, len(movable)))
	for _, rt := range movable[:min(n, len(movable))] {
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

package fleetbench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// The rollout phase (SPEC G1) moves one module's channel to rolloutVersion
// under a ModuleRollout and measures the rollout against two ideals:
//   - at the measured speed: each wave as long as its runtimes take at the
//     speed the same operator moved Manifests in the fleet-wide upgrade
//     of this run (else the install), plus the soaks between waves. What
//     is left is everything the rollout adds: noticing the channel move,
//     admitting a wave, shards learning of it, a wave's latency, noticing
//     it Ready.
//   - back to back: the same waves with their own measured upgrade times,
//     each starting the moment the one before has soaked. What is left is
//     the time lost between waves.

// rolloutVersion is the version the rollout phase moves the first module
// to; only that module publishes it.
const rolloutVersion = "3.0.0"

// rolloutName is the benchmark's ModuleRollout.
const rolloutName = "fleetbench"

// RolloutOptions are the policy of the rollout phase.
type RolloutOptions struct {
	// Canary is the canary wave's size (0: none).
	Canary int
	// MaxInFlight is the size of every later wave: a count or a percentage
	// of the fleet, as in a ModuleRollout.
	MaxInFlight intstr.IntOrString
	// Soak is each wave's soak time.
	Soak time.Duration
}

// DefaultRolloutOptions are a canary of 2, then waves of 20% of the fleet,
// each soaked for 10 s.
func DefaultRolloutOptions() *RolloutOptions {
	return &RolloutOptions{Canary: 2, MaxInFlight: intstr.FromString("20%"), Soak: 10 * time.Second}
}

func (o *RolloutOptions) validate(kymas int) error {
	if o.Canary < 0 || o.Soak < 0 {
		return fmt.Errorf("rollout: the canary and the soak must not be negative")
	}
	if _, err := o.waveSize(kymas); err != nil {
		return err
	}
	return nil
}

// waveSize is maxInFlight for a fleet of n, rounded as a ModuleRollout
// rounds it: up, and at least one.
func (o *RolloutOptions) waveSize(n int) (int, error) {
	size, err := intstr.GetScaledValueFromIntOrPercent(&o.MaxInFlight, n, true)
	if err != nil {
		return 0, fmt.Errorf("rollout: maxInFlight: %w", err)
	}
	return max(size, 1), nil
}

// plannedWaves are the sizes of the waves the policy makes of n runtimes.
func (o *RolloutOptions) plannedWaves(n int) []int {
	size, err := o.waveSize(n)
	if err != nil {
		return nil
	}
	var waves []int
	left := n
	if o.Canary > 0 {
		waves = append(waves, min(o.Canary, left))
		left -= waves[0]
	}
	for left > 0 {
		waves = append(waves, min(size, left))
		left -= size
	}
	return waves
}

// Rollout is the figures of the rollout phase.
type Rollout struct {
	// Phase is the phase's figures, as for the install and the upgrade:
	// the time until every Kyma showed the module Ready at the new
	// version, and the writes that took.
	Phase  *Phase `json:"phase"`
	Module string `json:"module"`
	Policy Policy `json:"policy"`
	Waves  []Wave `json:"waves"`
	Halted string `json:"halted,omitempty"`
	// PlannedWaves are the wave sizes the policy makes of the fleet.
	PlannedWaves []int `json:"plannedWaves"`
	// TotalSeconds is from the channel move until the rollout showed
	// Completed.
	TotalSeconds float64 `json:"totalSeconds"`
	// IdealSeconds is the waves back to back: each wave's own upgrade time
	// (from its admission until the rollout saw it Ready) plus the soak
	// between waves. RatioToIdeal is TotalSeconds over it; OverheadSeconds
	// their difference, made of StartSeconds (channel move until the first
	// wave was admitted) and the waits between a wave's soak ending and the
	// next wave's admission.
	IdealSeconds    float64 `json:"idealSeconds"`
	RatioToIdeal    float64 `json:"ratioToIdeal"`
	OverheadSeconds float64 `json:"overheadSeconds"`
	StartSeconds    float64 `json:"startSeconds"`
	// AtOnceSeconds is the fleet-wide upgrade of the same run, with no
	// rollout policy, for comparison (0 without an upgrade phase).
	AtOnceSeconds float64 `json:"atOnceSeconds,omitempty"`
	// Shards is how many shards ran the operator (0: one process).
	Shards int `json:"shards,omitempty"`
	// ManifestsPerSecond is the speed the ideal at speed assumes: the
	// Manifests per second the fleet-wide upgrade of this run moved
	// (SpeedFrom "upgrade"), else its install ("install").
	ManifestsPerSecond float64 `json:"manifestsPerSecond,omitempty"`
	SpeedFrom          string  `json:"speedFrom,omitempty"`
	// IdealAtSpeedSeconds is, over the waves as run, each wave's Kymas
	// (one Manifest each) at ManifestsPerSecond, plus a soak between each
	// two waves; RatioToIdealAtSpeed is TotalSeconds over it.
	IdealAtSpeedSeconds float64 `json:"idealAtSpeedSeconds,omitempty"`
	RatioToIdealAtSpeed float64 `json:"ratioToIdealAtSpeed,omitempty"`
}

// atSpeed fills the ideal at speed: the waves as run, each taking its
// Kymas ÷ speed, and soak between each two.
func (r *Rollout) atSpeed(speed float64, from string, soak time.Duration) {
	if speed <= 0 || len(r.Waves) == 0 {
		return
	}
	r.ManifestsPerSecond, r.SpeedFrom = speed, from
	ideal := 0.0
	for i := range r.Waves {
		r.Waves[i].IdealSeconds = float64(r.Waves[i].Kymas) / speed
		ideal += r.Waves[i].IdealSeconds
		if i > 0 {
			ideal += soak.Seconds()
		}
	}
	r.IdealAtSpeedSeconds = ideal
	if r.TotalSeconds > 0 && ideal > 0 {
		r.RatioToIdealAtSpeed = r.TotalSeconds / ideal
	}
}

// manifestSpeed is the Manifests per second the first converged phase of
// phases moved (every phase moves all manifests), and that phase's name.
func manifestSpeed(manifests int, phases ...*Phase) (float64, string) {
	for _, p := range phases {
		if p != nil && p.Converged && p.Seconds > 0 {
			return float64(manifests) / p.Seconds, p.Name
		}
	}
	return 0, ""
}

// Policy is the rollout policy as run.
type Policy struct {
	Canary      int     `json:"canary"`
	MaxInFlight string  `json:"maxInFlight"`
	SoakSeconds float64 `json:"soakSeconds"`
}

// Wave is one wave as the benchmark watched it, in seconds from the channel
// move.
type Wave struct {
	Index int `json:"index"`
	Kymas int `json:"kymas"`
	// StartSeconds is when the rollout admitted the wave; ReadySeconds when
	// it saw the wave Ready (its soak began); UpgradeSeconds the difference.
	StartSeconds   float64 `json:"startSeconds"`
	ReadySeconds   float64 `json:"readySeconds"`
	UpgradeSeconds float64 `json:"upgradeSeconds"`
	// IdealSeconds is the wave's Kymas at the measured speed.
	IdealSeconds float64 `json:"idealSeconds,omitempty"`
	// WaitSeconds is the time after the previous wave's soak ended until
	// this wave was admitted (for the first wave: since the channel move).
	WaitSeconds float64 `json:"waitSeconds"`
}

// runRollout creates the ModuleRollout, waits until it stands at the
// channel's current version, then moves the channel and follows the
// rollout until every Kyma has the new version. bg bounds the watch.
func (b *bench) runRollout(ctx, bg context.Context) (*Rollout, error) {
	module := b.modules[0]
	policy := b.opts.Rollout
	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: rolloutName, Namespace: namespace},
		Spec: v1beta2.ModuleRolloutSpec{
			ModuleName:  module,
			Channel:     benchChannel,
			MaxInFlight: policy.MaxInFlight,
			SoakTime:    metav1.Duration{Duration: policy.Soak},
			// The benchmark's modules do not fail; one that does should
			// stop the run rather than hide in the figures.
			MaxFailures: intstr.FromInt32(0),
		},
	}
	if policy.Canary > 0 {
		ro.Spec.Canary = &v1beta2.RolloutCanary{Count: intstr.FromInt(policy.Canary)}
	}
	if err := b.client.Create(ctx, ro); err != nil {
		return nil, fmt.Errorf("creating the ModuleRollout: %w", err)
	}
	b.benchWrites.Add(1)

	rec := &rolloutRecorder{}
	if err := watchRollout(bg, b.kcp.Config(), rec); err != nil {
		return nil, err
	}
	// The first version a rollout sees is where the fleet stands; the
	// channel must not move before it saw it.
	current := installVersion
	if b.opts.Upgrade {
		current = upgradeVersion
	}
	if err := rec.waitBaseline(ctx, current); err != nil {
		return nil, fmt.Errorf("the ModuleRollout did not take up version %s: %w", current, err)
	}

	var moved time.Time
	phase, err := b.runPhase(ctx, phaseRollout, goal{version: rolloutVersion, modules: b.opts.Modules, module: module}, true, func(ctx context.Context) error {
		rec.begin(rolloutVersion)
		moved = time.Now()
		return moveChannel(ctx, b.client, namespace, []string{module}, rolloutVersion, &b.benchWrites)
	})
	if err == nil {
		// The Kymas can show the version before the rollout controller
		// wrote Completed; the rollout's time ends with the latter.
		err = rec.waitCompleted(ctx)
	}
	r := rec.figures(moved, policy.Soak)
	r.Phase = phase
	r.Module = module
	r.Policy = Policy{Canary: policy.Canary, MaxInFlight: policy.MaxInFlight.String(), SoakSeconds: policy.Soak.Seconds()}
	r.PlannedWaves = policy.plannedWaves(b.opts.Kymas)
	if b.report.Upgrade != nil && b.report.Upgrade.Converged {
		r.AtOnceSeconds = b.report.Upgrade.Seconds
	}
	r.Shards = b.opts.Shards
	speed, from := manifestSpeed(b.opts.Kymas*b.opts.Modules, b.report.Upgrade, b.report.Install)
	r.atSpeed(speed, from, policy.Soak)
	if err == nil && r.Halted != "" {
		err = fmt.Errorf("the rollout halted: %s", r.Halted)
	}
	return r, err
}

// rolloutRecorder follows the benchmark's ModuleRollout through a watch and
// records when it admitted each wave and saw it Ready, on this process's
// clock: status timestamps have whole seconds only, too coarse for waves
// of a few seconds.
type rolloutRecorder struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on each observation
	latest    v1beta2.ModuleRolloutStatus
	target    string
	waves     []waveSeen
	completed time.Time
	halted    string
}

type waveSeen struct {
	kymas        int
	start, ready time.Time
}

func (r *rolloutRecorder) observe(obj any) {
	ro, ok := obj.(*v1beta2.ModuleRollout)
	if !ok || ro.Name != rolloutName {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ro.Status
	r.latest = *s.DeepCopy()
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
	if r.target == "" || s.ToVersion != r.target || s.StartedAt == nil {
		return
	}
	// A wave is Ready when the rollout says so, or when a later wave or
	// the completion shows it was (without a soak both come in one write).
	markReady := func(upTo int) {
		for i := range r.waves {
			if i <= upTo && r.waves[i].ready.IsZero() {
				r.waves[i].ready = now
			}
		}
	}
	if w := int(s.Wave); w >= 0 {
		markReady(w - 1)
		for len(r.waves) <= w {
			r.waves = append(r.waves, waveSeen{})
		}
		if r.waves[w].start.IsZero() {
			r.waves[w].start = now
			r.waves[w].kymas = len(s.InFlight)
		}
		if s.WaveReadyAt != nil {
			markReady(w)
		}
	}
	switch s.Phase {
	case v1beta2.RolloutCompleted:
		markReady(len(r.waves) - 1)
		if r.completed.IsZero() {
			r.completed = now
		}
	case v1beta2.RolloutHalted:
		r.halted = s.HaltReason
	}
}

// begin starts recording the rollout to version.
func (r *rolloutRecorder) begin(version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = version
}

// wait waits until cond holds for the latest status, or ctx ends.
func (r *rolloutRecorder) wait(ctx context.Context, cond func() bool) error {
	for {
		r.mu.Lock()
		ok := cond()
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (r *rolloutRecorder) waitBaseline(ctx context.Context, version string) error {
	return r.wait(ctx, func() bool {
		return r.latest.ToVersion == version && r.latest.Phase == v1beta2.RolloutCompleted
	})
}

func (r *rolloutRecorder) waitCompleted(ctx context.Context) error {
	return r.wait(ctx, func() bool { return !r.completed.IsZero() || r.halted != "" })
}

// figures computes the rollout's figures from what was recorded; moved is
// when the channel moved.
func (r *rolloutRecorder) figures(moved time.Time, soak time.Duration) *Rollout {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := &Rollout{Halted: r.halted}
	if moved.IsZero() {
		return out
	}
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(moved).Seconds()
	}
	ideal, wait := 0.0, 0.0
	soakEnded := moved
	for i, w := range r.waves {
		wave := Wave{Index: i, Kymas: w.kymas, StartSeconds: since(w.start), ReadySeconds: since(w.ready)}
		if !w.ready.IsZero() && !w.start.IsZero() {
			wave.UpgradeSeconds = w.ready.Sub(w.start).Seconds()
		}
		if !w.start.IsZero() {
			wave.WaitSeconds = max(0, w.start.Sub(soakEnded).Seconds())
		}
		ideal += wave.UpgradeSeconds
		wait += wave.WaitSeconds
		if i > 0 {
			ideal += soak.Seconds()
		}
		soakEnded = w.ready.Add(soak)
		out.Waves = append(out.Waves, wave)
	}
	if len(r.waves) > 0 {
		out.StartSeconds = since(r.waves[0].start)
	}
	if r.completed.IsZero() {
		return out
	}
	out.TotalSeconds = since(r.completed)
	out.IdealSeconds = ideal
	out.OverheadSeconds = out.TotalSeconds - ideal
	if ideal > 0 {
		out.RatioToIdeal = out.TotalSeconds / ideal
	}
	return out
}

// watchRollout starts a watch of the benchmark's ModuleRollout that feeds
// rec, and returns once it has synced. It runs until ctx is done.
func watchRollout(ctx context.Context, cfg *rest.Config, rec *rolloutRecorder) error {
	return watchKind(ctx, cfg, namespace, &v1beta2.ModuleRollout{}, nil, rec.observe)
}

// print writes the rollout's figures for people; nothing without a rollout.
func (r *Rollout) print(w io.Writer) {
	if r == nil {
		return
	}
	shards := ""
	if r.Shards > 1 {
		shards = fmt.Sprintf(", %d shards", r.Shards)
	}
	fmt.Fprintf(w, "\nrollout of %s to %s (canary %d, maxInFlight %s, soak %gs%s): %d waves (planned %v)",
		r.Module, rolloutVersion, r.Policy.Canary, r.Policy.MaxInFlight, r.Policy.SoakSeconds, shards, len(r.Waves), r.PlannedWaves)
	if r.TotalSeconds > 0 {
		fmt.Fprintf(w, "; total %.1fs", r.TotalSeconds)
		if r.IdealAtSpeedSeconds > 0 {
			fmt.Fprintf(w, "; ideal at the %s's %.1f Manifests/s %.1fs (ratio %.2f)", r.SpeedFrom, r.ManifestsPerSecond, r.IdealAtSpeedSeconds, r.RatioToIdealAtSpeed)
		}
		fmt.Fprintf(w, "; these waves back to back %.1fs (ratio %.2f; overhead %.1fs, %.1fs of it before the first wave)",
			r.IdealSeconds, r.RatioToIdeal, r.OverheadSeconds, r.StartSeconds)
	}
	if r.AtOnceSeconds > 0 {
		fmt.Fprintf(w, "; the fleet-wide upgrade of every module without a policy took %.1fs", r.AtOnceSeconds)
	}
	fmt.Fprintln(w)
	if r.Halted != "" {
		fmt.Fprintf(w, "rollout halted: %s\n", r.Halted)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "wave\tKymas\tadmitted\tReady\tupgrade\tideal at speed\twaited after soak\t")
	for _, wave := range r.Waves {
		fmt.Fprintf(tw, "%d\t%d\t%.1fs\t%.1fs\t%.1fs\t%.1fs\t%.2fs\t\n",
			wave.Index, wave.Kymas, wave.StartSeconds, wave.ReadySeconds, wave.UpgradeSeconds, wave.IdealSeconds, wave.WaitSeconds)
	}
	_ = tw.Flush()
}

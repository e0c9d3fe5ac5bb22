// Package rollout carries out ModuleRollouts (SPEC G1): when a module's
// channel points to a new version, it lets the fleet's runtimes move to it
// wave by wave. It never writes a Manifest itself: it decides which Kymas
// may move (status.inFlight), and the Kyma controller holds every other
// Kyma's Manifest at the version it has (Hold, used by internal/controller/kyma).
package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// Reasons of a rollout's conditions.
const (
	ReasonCompleted   = "Completed"
	ReasonProgressing = "WaveInFlight"
	ReasonSoaking     = "Soaking"
	ReasonPaused      = "Paused"
	ReasonHalted      = "Halted"
	ReasonInvalid     = "Invalid"
)

// Reconciler reconciles ModuleRollouts.
type Reconciler struct {
	client.Client
	// Namespace holds the catalog, the Kymas and their Manifests.
	Namespace string
	// Clock tells the time; the real one when nil.
	Clock clock.PassiveClock
	// Poll is how often a rollout in flight is looked at when nothing
	// changes; Manifest changes requeue it at once.
	Poll time.Duration
	// Fleet reads the Kymas and Manifests of the whole fleet: in a sharded
	// operator a cache of its own (NewFleetCache), since the manager's
	// holds its shard's part only; nil means the Client.
	Fleet client.Reader
	// Analyzer evaluates the rollouts' analyses; without it a rollout
	// with analyses holds its wave's soak (analysis.go).
	Analyzer Analyzer
}

// fleet is where the Kymas and Manifests are read.
func (r *Reconciler) fleet() client.Reader {
	if r.Fleet != nil {
		return r.Fleet
	}
	return r.Client
}

// Reconcile runs the skeleton on the rollout: the plan, then its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rollout := &v1beta2.ModuleRollout{}
	if err := r.Get(ctx, req.NamespacedName, rollout); err != nil {
		return ctrl.Result{}, forgetIfNotFound(req.Name, err)
	}
	return reconciler.Run(ctx, r.Client, rollout, reconciler.Phases[*v1beta2.ModuleRollout]{
		Controller: "rollout",
		Reconcile:  r.reconcile,
		Record:     record,
		Status:     func(m *v1beta2.ModuleRollout) any { return &m.Status },
	})
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Reconciler) reconcile(ctx context.Context, rollout *v1beta2.ModuleRollout) reconciler.Outcome {
	channel, err := r.channel(ctx, rollout.Spec)
	if err != nil {
		return reconciler.Retry(ReasonInvalid, fmt.Sprintf("Reading the channel failed: %s", reconciler.Cause(err)), err)
	}
	if channel.Version == "" {
		o := reconciler.Stalled(ReasonInvalid, fmt.Sprintf("Module %s has no channel %q: create its ModuleReleaseMeta with that channel, or fix spec.channel",
			rollout.Spec.ModuleName, rollout.Spec.Channel), nil)
		o.After = r.Poll * 10
		return o
	}
	runtimes, err := r.runtimes(ctx, rollout.Spec)
	if err != nil {
		return reconciler.Retry(ReasonInvalid, fmt.Sprintf("Reading the rollout's runtimes failed: %s", reconciler.Cause(err)), err)
	}
	r.analyze(ctx, rollout, runtimes)
	next, after, err := Plan(rollout.Spec, rollout.Status, channel, runtimes, r.now())
	if err != nil {
		return reconciler.Stalled(ReasonInvalid, fmt.Sprintf("The rollout policy cannot be applied: %s", err), err)
	}
	conditions := rollout.Status.Conditions
	rollout.Status = next
	rollout.Status.Conditions = conditions
	rollout.Status.ObservedGeneration = rollout.Generation
	if next.Phase != v1beta2.RolloutHalted && next.Phase != v1beta2.RolloutCompleted {
		after = cmp.Or(min(after, r.Poll), r.Poll)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Rollout planned", "phase", next.Phase, "wave", next.Wave, "inFlight", len(next.InFlight), "done", next.Done, "total", next.Total)
	return outcomeOf(rollout, after)
}

// outcomeOf turns the plan into the conditions kstatus reads.
func outcomeOf(rollout *v1beta2.ModuleRollout, after time.Duration) reconciler.Outcome {
	s := rollout.Status
	progress := fmt.Sprintf("%s → %s: %d of %d runtimes done, wave %d", cmp.Or(s.FromVersion, "-"), s.ToVersion, s.Done, s.Total, s.Wave)
	switch s.Phase {
	case v1beta2.RolloutCompleted:
		return reconciler.Ready(ReasonCompleted, fmt.Sprintf("Every runtime on channel %s may have %s (%d of %d done)", rollout.Spec.Channel, s.ToVersion, s.Done, s.Total), after)
	case v1beta2.RolloutHalted:
		o := reconciler.Stalled(ReasonHalted, "Halted: "+s.HaltReason, nil)
		o.After = after
		return o
	case v1beta2.RolloutPaused:
		return reconciler.Progressing(ReasonPaused, progress+"; paused (spec.paused) before the next wave", after)
	}
	if len(s.InFlight) == 0 && s.WaveReadyAt != nil {
		return reconciler.Progressing(ReasonSoaking, fmt.Sprintf("%s; soaking since %s", progress, s.WaveReadyAt.UTC().Format(time.RFC3339)), after)
	}
	return reconciler.Progressing(ReasonProgressing, fmt.Sprintf("%s; in flight: %s", progress, strings.Join(s.InFlight, ", ")), after)
}

func record(rollout *v1beta2.ModuleRollout, o reconciler.Outcome) {
	if !o.Records() {
		return
	}
	reconciler.SetConditions(&rollout.Status.Conditions, rollout.Generation, o)
	recordMetrics(rollout)
}

// channel is the version the rollout's channel points to and its template.
func (r *Reconciler) channel(ctx context.Context, spec v1beta2.ModuleRolloutSpec) (Channel, error) {
	metas := &v1beta2.ModuleReleaseMetaList{}
	if err := r.List(ctx, metas, client.InNamespace(r.Namespace)); err != nil {
		return Channel{}, err
	}
	templates := &v1beta2.ModuleTemplateList{}
	if err := r.List(ctx, templates, client.InNamespace(r.Namespace)); err != nil {
		return Channel{}, err
	}
	catalog := resolve.NewCatalog(templates.Items, metas.Items)
	releaseMeta, ok := catalog.ReleaseMeta(spec.ModuleName)
	if !ok {
		return Channel{}, nil
	}
	var ch Channel
	for _, a := range releaseMeta.Spec.Channels {
		if a.Channel == spec.Channel {
			ch.Version = a.Version
		}
	}
	if template, ok := catalog.Template(spec.ModuleName, ch.Version); ok {
		ch.Template = fmt.Sprintf("%s/%s@%s", template.Namespace, template.Name, template.ResourceVersion)
	}
	return ch, nil
}

// runtimes are the rollout's runtimes: Kymas that have the module's
// Manifest and resolve the module through the rollout's channel. A Kyma
// that does not have the module yet installs the channel's version at
// once; a rollout moves what is installed.
func (r *Reconciler) runtimes(ctx context.Context, spec v1beta2.ModuleRolloutSpec) ([]Runtime, error) {
	kymas := &v1beta2.KymaList{}
	if err := r.fleet().List(ctx, kymas, client.InNamespace(r.Namespace), client.MatchingFields{kyma.ModuleIndex: spec.ModuleName}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the Kymas of module %s: %w", spec.ModuleName, err)
	}
	var out []Runtime
	for i := range kymas.Items {
		k := &kymas.Items[i]
		if ChannelOf(k, spec.ModuleName) != spec.Channel {
			continue
		}
		m := &v1beta2.Manifest{}
		key := client.ObjectKey{Namespace: k.Namespace, Name: kyma.ManifestName(k.Name, spec.ModuleName)}
		if err := r.fleet().Get(ctx, key, m, client.UnsafeDisableDeepCopy); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return nil, err
		}
		out = append(out, Runtime{
			Kyma: k.Name, Labels: k.Labels, Version: m.Spec.Version, State: m.Status.State,
			Current: m.Status.ObservedGeneration == m.Generation && readyConditionCurrent(m),
		})
	}
	slices.SortFunc(out, func(a, b Runtime) int { return strings.Compare(a.Kyma, b.Kyma) })
	return out, nil
}

// readyConditionCurrent says the Manifest's Ready condition was written for
// its current generation.
func readyConditionCurrent(m *v1beta2.Manifest) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, "Ready")
	return c != nil && c.ObservedGeneration == m.Generation
}

// ChannelOf is the channel a Kyma resolves a module through: the module
// entry's own, else the Kyma's, else the default; empty when the Kyma does
// not list the module (a mandatory module has no channel).
func ChannelOf(kyma *v1beta2.Kyma, module string) string {
	for _, m := range kyma.Spec.Modules {
		if m.Name == module {
			return cmp.Or(m.Channel, kyma.Spec.Channel, v1beta2.DefaultChannel)
		}
	}
	for _, m := range kyma.Status.RuntimeModules {
		if m.Name == module {
			return cmp.Or(m.Channel, kyma.Spec.Channel, v1beta2.DefaultChannel)
		}
	}
	return ""
}

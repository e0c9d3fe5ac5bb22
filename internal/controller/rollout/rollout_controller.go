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

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/maintenance"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

// Reasons of a rollout's conditions.
const (
	ReasonCompleted   = "Completed"
	ReasonProgressing = "WaveInFlight"
	ReasonSoaking     = "Soaking"
	ReasonWaiting     = "WaitingForRuntimes"
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
	// Content pins a version's content links when its rollout starts, and
	// again at most every Poll to see whether a tag moved; without it the
	// links are taken as the template has them.
	Content TemplatePinner
	// Pause and Maintenance tell the runtimes that cannot move now; they
	// are pending with that reason, never admitted to a wave.
	Pause       pause.Policy
	Maintenance *maintenance.Policy
	// UpgradePolicy tells the Kymas whose modules upgrade manually; those
	// that wait for their owner are pending with that reason too.
	UpgradePolicy *upgradepolicy.Policy

	pins     pinMemo
	analyses analysisMemo
}

// TemplatePinner pins a template's content links by digest
// (content.Templates).
type TemplatePinner interface {
	Pin(ctx context.Context, template *v1beta2.ModuleTemplate) ([]v1beta2.ContentResource, error)
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
		if apierrors.IsNotFound(err) {
			r.pins.forget(req.NamespacedName)
			r.analyses.forget(req.NamespacedName)
			forgetMetrics(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
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
	catalog, err := r.catalog(ctx)
	if err != nil {
		return reconciler.Retry(ReasonInvalid, fmt.Sprintf("Reading the catalog failed: %s", reconciler.Cause(err)), err)
	}
	channel, err := catalog.channel(rollout.Spec)
	if err != nil {
		o := reconciler.Stalled(ReasonInvalid, "The rollout has no version to roll out: "+err.Error(), nil)
		o.After = r.Poll * 10
		return o
	}
	r.pinContent(ctx, rollout, catalog, &channel)
	runtimes, err := r.runtimes(ctx, rollout.Spec, catalog, channel)
	if err != nil {
		return reconciler.Retry(ReasonInvalid, fmt.Sprintf("Reading the rollout's runtimes failed: %s", reconciler.Cause(err)), err)
	}
	r.analyze(ctx, rollout, runtimes)
	now := r.now()
	next, after, err := Plan(rollout.Spec, rollout.Status, channel, runtimes, now)
	if err != nil {
		return reconciler.Stalled(ReasonInvalid, fmt.Sprintf("The rollout policy cannot be applied: %s", err), err)
	}
	next.Conditions = rollout.Status.Conditions
	next.ObservedGeneration = rollout.Generation
	next.PlannedAt = r.plannedAt(rollout.Status, next, now)
	rollout.Status = next
	// A moving rollout is looked at every Poll; so is a halted one with
	// analyses, whose outcomes change with no event to say so (the halt
	// holds, its status shows the fleet recovering).
	analysed := next.Phase == v1beta2.RolloutHalted && len(rollout.Spec.Analysis) > 0
	if next.Phase != v1beta2.RolloutHalted && next.Phase != v1beta2.RolloutCompleted || analysed {
		after = cmp.Or(min(after, r.Poll), r.Poll)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Rollout planned", "phase", next.Phase, "wave", next.Wave, "inFlight", len(next.InFlight), "done", next.Done, "total", next.Total)
	return outcomeOf(rollout, after, now)
}

// outcomeOf turns the plan into the conditions kstatus reads.
func outcomeOf(rollout *v1beta2.ModuleRollout, after time.Duration, now time.Time) reconciler.Outcome {
	s := rollout.Status
	progress := fmt.Sprintf("%s → %s: %d of %d runtimes done, wave %d", cmp.Or(s.FromVersion, "-"), s.ToVersion, s.Done, s.Total, s.Wave)
	if s.Rollback != nil && s.Rollback.Refused == "" && s.Rollback.Of != "" {
		progress = "Rolling back (" + s.Rollback.By + "): " + progress
	}
	switch s.Phase {
	case v1beta2.RolloutCompleted:
		if s.Rollback != nil && s.Rollback.Refused == "" && s.Rollback.Of != "" && s.Rollback.Of != s.ToVersion {
			return reconciler.Ready(ReasonCompleted, fmt.Sprintf("Rolled back from %s to %s (%s): %d of %d runtimes done; they stay at %s until the channel points to another version",
				s.Rollback.Of, s.ToVersion, s.Rollback.By, s.Done, s.Total, s.ToVersion), after)
		}
		return reconciler.Ready(ReasonCompleted, fmt.Sprintf("Every runtime of the rollout may have %s (%d of %d done)", s.ToVersion, s.Done, s.Total), after)
	case v1beta2.RolloutHalted:
		o := reconciler.Stalled(ReasonHalted, "Halted: "+s.HaltReason, nil)
		o.After = after
		return o
	case v1beta2.RolloutPaused:
		return reconciler.Progressing(ReasonPaused, progress+"; paused (spec.paused) before the next wave", after)
	}
	soaking := s.WaveReadyAt != nil && now.Before(s.WaveReadyAt.Add(rollout.Spec.SoakTime.Duration))
	switch {
	case len(s.InFlight) > 0:
		return reconciler.Progressing(ReasonProgressing, fmt.Sprintf("%s; in flight: %s", progress, strings.Join(s.InFlight, ", ")), after)
	case !soaking && len(s.Runtimes.Pending) > 0 && s.Runtimes.Pending[0].Reason != "":
		return reconciler.Progressing(ReasonWaiting, fmt.Sprintf("%s; waiting for runtimes that cannot move now, such as %s (%s)",
			progress, s.Runtimes.Pending[0].Kyma, s.Runtimes.Pending[0].Reason), after)
	case s.WaveReadyAt != nil && len(rollout.Spec.Analysis) > 0:
		return reconciler.Progressing(ReasonSoaking, fmt.Sprintf("%s; soaking and analysing since %s", progress, s.WaveReadyAt.UTC().Format(time.RFC3339)), after)
	case soaking:
		return reconciler.Progressing(ReasonSoaking, fmt.Sprintf("%s; soaking since %s", progress, s.WaveReadyAt.UTC().Format(time.RFC3339)), after)
	}
	return reconciler.Progressing(ReasonProgressing, progress+"; starting the next wave", after)
}

func record(rollout *v1beta2.ModuleRollout, o reconciler.Outcome) {
	if !o.Records() {
		return
	}
	reconciler.SetConditions(&rollout.Status.Conditions, rollout.Generation, o)
	recordMetrics(rollout)
}

// catalogView is the module catalog as the cache holds it.
type catalogView struct {
	resolve.Catalog
	templates []v1beta2.ModuleTemplate
}

// catalog reads the module catalog from the cache.
func (r *Reconciler) catalog(ctx context.Context) (catalogView, error) {
	metas := &v1beta2.ModuleReleaseMetaList{}
	if err := r.List(ctx, metas, client.InNamespace(r.Namespace)); err != nil {
		return catalogView{}, err
	}
	templates := &v1beta2.ModuleTemplateList{}
	if err := r.List(ctx, templates, client.InNamespace(r.Namespace)); err != nil {
		return catalogView{}, err
	}
	return catalogView{Catalog: resolve.NewCatalog(templates.Items, metas.Items), templates: templates.Items}, nil
}

// channel is the version the rollout's channel points to (its module's
// mandatory version when the rollout names no channel), its template, and
// the module's published versions; an error says what to fix.
func (c catalogView) channel(spec v1beta2.ModuleRolloutSpec) (Channel, error) {
	releaseMeta, ok := c.ReleaseMeta(spec.ModuleName)
	if !ok {
		return Channel{}, fmt.Errorf("module %s has no ModuleReleaseMeta: publish one, or fix spec.moduleName", spec.ModuleName)
	}
	var ch Channel
	if spec.Channel == "" {
		if releaseMeta.Spec.Mandatory == nil {
			return Channel{}, fmt.Errorf("module %s is not mandatory (its ModuleReleaseMeta has no mandatory.version): set spec.channel to roll out one of its channels", spec.ModuleName)
		}
		ch.Version = releaseMeta.Spec.Mandatory.Version
	}
	for _, a := range releaseMeta.Spec.Channels {
		if spec.Channel != "" && a.Channel == spec.Channel {
			ch.Version = a.Version
		}
	}
	if ch.Version == "" {
		return Channel{}, fmt.Errorf("module %s has no channel %q: add it to its ModuleReleaseMeta, or fix spec.channel", spec.ModuleName, spec.Channel)
	}
	ch.Releases = map[string]Release{}
	for i := range c.templates {
		t := &c.templates[i]
		if resolve.ModuleName(t) != spec.ModuleName {
			continue
		}
		if indexed, ok := c.Template(spec.ModuleName, t.Spec.Version); ok {
			ch.Releases[t.Spec.Version] = Release{Template: ref(indexed), RollbackTo: indexed.Spec.RollbackTo}
		}
	}
	ch.Template = ch.Releases[ch.Version].Template
	return ch, nil
}

// ref is how the rollout names a template revision: namespace/name@revision.
func ref(template *v1beta2.ModuleTemplate) string {
	return fmt.Sprintf("%s/%s@%s", template.Namespace, template.Name, template.ResourceVersion)
}

// plannedAt is when the planner looked at the rollout, as its status says
// it: refreshed at least every Poll while the rollout moves (Kyma
// controllers tell a planner that is gone by its age), and otherwise only
// with a status that changes anyway, so that a settled rollout costs no
// writes.
func (r *Reconciler) plannedAt(last, next v1beta2.ModuleRolloutStatus, now time.Time) *metav1.Time {
	moving := next.Phase == v1beta2.RolloutProgressing || next.Phase == v1beta2.RolloutPaused
	was := last.DeepCopy()
	was.PlannedAt, was.Conditions, was.ObservedGeneration = nil, nil, 0
	is := next.DeepCopy()
	is.PlannedAt, is.Conditions, is.ObservedGeneration = nil, nil, 0
	if last.PlannedAt == nil || !equality.Semantic.DeepEqual(was, is) || moving && now.Sub(last.PlannedAt.Time) >= r.Poll/2 {
		return &metav1.Time{Time: now}
	}
	return last.PlannedAt
}

// runtimes are the rollout's runtimes: Kymas that have the module's
// Manifest and resolve the module through the rollout's channel (every
// Kyma, for a mandatory module's rollout). A Kyma that does not have the
// module yet installs the rollout's version at once; a rollout moves what
// is installed.
func (r *Reconciler) runtimes(ctx context.Context, spec v1beta2.ModuleRolloutSpec, catalog catalogView, channel Channel) ([]Runtime, error) {
	kymas := &v1beta2.KymaList{}
	if err := r.fleet().List(ctx, kymas, client.InNamespace(r.Namespace), client.MatchingFields{kyma.ModuleIndex: spec.ModuleName}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the Kymas of module %s: %w", spec.ModuleName, err)
	}
	template, _ := catalog.Template(spec.ModuleName, channel.Version)
	now := r.now()
	var out []Runtime
	for i := range kymas.Items {
		k := &kymas.Items[i]
		if spec.Channel != "" && ChannelOf(k, spec.ModuleName) != spec.Channel {
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
		rt := Runtime{
			Kyma: k.Name, Labels: k.Labels, Version: m.Spec.Version, State: m.Status.State,
			Current: m.Status.ObservedGeneration == m.Generation && readyConditionCurrent(m),
			Blocked: r.blocked(k, toward{module: spec.ModuleName, from: m.Spec.Version, to: channel.Version}, template, now),
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, "Ready"); c != nil {
			rt.Message = c.Message
		}
		out = append(out, rt)
	}
	slices.SortFunc(out, func(a, b Runtime) int { return strings.Compare(a.Kyma, b.Kyma) })
	return out, nil
}

// blocked says why the Kyma's runtime cannot move to the template's
// version now, or "" when it can: work on it is paused or it hibernates
// (the Kyma controller does nothing for it), the module upgrades manually
// and waits for the runtime owner's approval, or the version requires
// downtime and its maintenance window is closed.
func (r *Reconciler) blocked(k *v1beta2.Kyma, move toward, template *v1beta2.ModuleTemplate, now time.Time) string {
	if sleep, asleep := r.Pause.Asleep(k); asleep {
		return fmt.Sprintf("hibernated until %s", sleep.Until.UTC().Format(time.RFC3339))
	}
	if r.Pause.Paused(k) {
		return "paused: its Kyma is labelled " + v1beta2.SkipReconciliationLabel + "=true or matches --pause-selector"
	}
	if reason := r.waitsForOwner(k, move, now); reason != "" {
		return reason
	}
	if r.Maintenance == nil || template == nil || !template.Spec.RequiresDowntime || k.Spec.SkipMaintenanceWindows {
		return ""
	}
	slot, ok := r.Maintenance.SlotFor(k.Name, k.Labels, now)
	switch {
	case !ok:
		return "the version requires downtime and no maintenance window matches the Kyma"
	case !slot.Open(now):
		return fmt.Sprintf("outside its maintenance window %s until %s", slot.Window, slot.At.UTC().Format(time.RFC3339))
	}
	return ""
}

// toward is a runtime's move: its module, from the installed version to
// the rollout's.
type toward struct {
	module, from, to string
}

// waitsForOwner says that the Kyma's runtime waits for its owner's
// approval of the module's new version (internal/controller/kyma,
// kyma_manual.go), or "". The Kyma's status says so once the Kyma
// controller recorded the offer: not approved, not forced, its deadline
// ahead. Until then (the channel just moved) a module that upgrades
// manually, to a newer version the control plane's Kyma does not approve,
// waits too: admitted to a wave, it would hold the wave until its owner
// approves.
func (r *Reconciler) waitsForOwner(k *v1beta2.Kyma, move toward, now time.Time) string {
	for _, ms := range k.Status.Modules {
		if ms.Name != move.module || ms.ManualUpgrade == nil {
			continue
		}
		if mu := ms.ManualUpgrade; !mu.Approved && !mu.Forced && now.Before(mu.ForceAt.Time) {
			return fmt.Sprintf("waiting for the runtime owner's approval of %s until %s", mu.Version, mu.ForceAt.UTC().Format(time.RFC3339))
		}
		return ""
	}
	if move.from == "" || move.from == move.to || newer(move.from, move.to) ||
		kyma.UpgradeModeOf(k, move.module, r.UpgradePolicy) != v1beta2.UpgradeManual || kyma.Approves(k.Spec.ApprovedUpgrades, move.module, move.to) {
		return ""
	}
	return fmt.Sprintf("waiting for the runtime owner's approval of %s", move.to)
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

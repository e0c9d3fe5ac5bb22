// Package kyma reconciles Kymas: it resolves each module to one
// ModuleTemplate, keeps one Manifest per module, and aggregates the modules'
// states into the Kyma's status (SPEC R1, R2, R4, R5).
package kyma

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/maintenance"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/priority"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

// Pinner turns a content link into a digest-pinned one, so that every runtime
// gets the same bytes whatever happens to tags later.
type Pinner = content.LinkPinner

// Descriptors derives the content links of a ModuleTemplate written the
// KLM way (content.Descriptors).
type Descriptors = content.Descriptors

// Reconciler reconciles Kymas.
type Reconciler struct {
	client.Client
	Runtimes remote.Runtimes
	Pinner   Pinner
	// Descriptors, when set, installs templates that carry only an OCM
	// component descriptor; without it they install no content.
	Descriptors Descriptors
	Recorder    events.EventRecorder
	Intervals   requeue.Intervals
	// SyncNamespace is where the runtime's own Kyma lives, unless the Kyma
	// names its own sync namespace.
	SyncNamespace string
	// Pause tells Kymas whose runtimes must not be touched.
	Pause pause.Policy
	// ReconcileTimeout bounds one reconcile; zero means none.
	ReconcileTimeout time.Duration
	// ProgressInterval is how often, at most, a status that only reports
	// that more modules became ready is written (kyma_progress.go); zero
	// means DefaultProgressInterval.
	ProgressInterval time.Duration
	// Rollouts, when true, holds installed modules at their version until
	// their channel's ModuleRollout lets the Kyma move (kyma_rollout.go).
	Rollouts bool
	// Takeover says which Kymas this operator takes over from the Kyma
	// lifecycle-manager (kyma_takeover.go).
	Takeover takeover.Policy
	// RolloutPlannerTimeout is how old a moving rollout's plan may be
	// before its held Kymas say that no planner runs; zero means
	// DefaultRolloutPlannerTimeout.
	RolloutPlannerTimeout time.Duration
	// Maintenance, when set, holds upgrades to versions that require
	// downtime until the runtime's maintenance window (kyma_maintenance.go).
	Maintenance *maintenance.Policy
	// UpgradePolicy says which Kymas' modules upgrade manually, and the
	// deadline of a manual upgrade (kyma_manual.go); nil: modules that set
	// no mode upgrade automatically, and a manual upgrade's deadline is
	// upgradepolicy.DefaultForceAfter.
	UpgradePolicy *upgradepolicy.Policy
	// Clock tells the time for maintenance windows; the real one when nil.
	Clock clock.PassiveClock
	// Reporting, when set, tells whether the runtime watcher reports
	// changes to the runtime's own Kyma; while it does, a Ready Kyma is
	// looked at every ReportedReadyFactor Ready intervals instead of every
	// one. A factor of 1 or less keeps the Ready interval.
	Reporting           Reporting
	ReportedReadyFactor int
	// Liveness, when set, tells what was last heard from the runtime's
	// watcher agent; each reconcile records it in the WatcherReporting
	// condition, which changes (and costs a write) only on a transition.
	// The listener and its fallback requeue the Kyma at each transition.
	Liveness Liveness

	events      *reconciler.Events
	wakes       *priority.Wakes // when the runtime frees a slot
	catalog     *catalogSnapshot
	ready       *readyClock
	progress    *progressWrites
	runtimeSide *runtimeSide

	// descriptors remembers what templates' OCM descriptors tell besides
	// content (kyma_descriptor.go).
	descriptors descriptorMemo
}

// Reconcile is the one skeleton (reconciler.Run) with the Kyma's phases:
// the runtime's worker slot as the gate; deletion, which runs even when the
// Kyma is paused; the pause; the finalizer; then reconcile, whose outcome
// the skeleton records in one status patch with an optimistic lock.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kyma := &v1beta2.Kyma{}
	if err := r.Get(ctx, req.NamespacedName, kyma); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	metrics.KymaReconciles.Inc()
	if err := r.releaseKLMFinalizers(ctx, kyma); err != nil {
		return ctrl.Result{}, err
	}
	var held bool
	return reconciler.Run(ctx, r.Client, kyma, reconciler.Phases[*v1beta2.Kyma]{
		Controller: "kyma",
		Finalizer:  v1beta2.KymaFinalizer,
		Gate:       r.gate,
		Deadline:   r.ReconcileTimeout,
		Paused:     r.Pause.Paused,
		OnPaused:   r.setPaused,
		PausedFor:  r.Pause.Wake,
		Delete:     r.finalize,
		Announce:   announce,
		Reconcile: func(ctx context.Context, kyma *v1beta2.Kyma) reconciler.Outcome {
			var o reconciler.Outcome
			o, held = r.reconcile(ctx, kyma)
			return o
		},
		Hold: func(*v1beta2.Kyma, reconciler.Outcome) bool { return held },
		Record: func(kyma *v1beta2.Kyma, o reconciler.Outcome) {
			recordOutcome(kyma, o)
			updateMetrics(kyma)
		},
		Status: kymaStatus,
		Events: r.events,
	})
}

// Reporting tells whether the runtime watcher reports every change to a
// runtime's own Kyma at once: its agent is healthy and a valid Watcher
// selects it (the default Watcher does).
type Reporting interface {
	ReportsKyma(ctx context.Context, kymaName string) bool
}

// readyAfter stretches a Ready Kyma's periodic look to ReportedReadyFactor
// Ready intervals while its runtime's agent reports changes to the
// runtime's Kyma: module choices made there arrive as reports, and
// Manifests, Secrets and the catalog are watched in the control plane. The
// periodic look stays, rarer, for what nobody reports (the runtime's copies
// of our CRDs and of the catalog, reports lost while the listener was away).
//
// The look falls on the moments of the periodic checks of the Kyma's
// Manifests (requeue.Aligned, grouped by the Kyma's name, as the Manifest
// controller's readyAfter): the runtime connection it opens serves the
// checks that follow within seconds, where a look at a moment of its own
// would open a second one (and pay a second TLS handshake) each interval,
// the connection being closed for idleness in between.
func (r *Reconciler) readyAfter(ctx context.Context, kyma *v1beta2.Kyma, o reconciler.Outcome) reconciler.Outcome {
	if o.Kind != reconciler.KindReady || r.Intervals.Ready <= 0 {
		return o
	}
	interval := r.Intervals.Ready
	if r.Reporting != nil && r.ReportedReadyFactor > 1 && r.Reporting.ReportsKyma(ctx, kyma.Name) {
		interval *= time.Duration(r.ReportedReadyFactor)
	}
	o.After = requeue.Aligned(interval, kyma.Name, r.now())
	return o
}

// gate lets a reconcile in when the runtime has a worker slot free; a
// runtime that already has its share waits its turn without holding one.
func (r *Reconciler) gate(_ context.Context, kyma *v1beta2.Kyma) (func(), time.Duration) {
	key := client.ObjectKeyFromObject(kyma)
	return remote.Gate(r.Runtimes, "kyma", kyma.Name, key.String(), func() { r.wakes.Wake(key) })
}

// reconcile brings the runtime side and the Manifests in step with the
// Kyma and says how the Kyma is doing (outcomeOf). held says that the new
// status only reports progress and waits (kyma_progress.go): neither the
// Kyma's status nor its runtime mirror is written this time.
func (r *Reconciler) reconcile(ctx context.Context, kyma *v1beta2.Kyma) (o reconciler.Outcome, held bool) {
	stored := kyma.Status.DeepCopy()
	// The runtime side first: its module list is half of what to install.
	// When the runtime cannot be read, the last list read stands in, and
	// nothing is uninstalled because of the outage.
	cluster, runtimeKyma, recreate, runtimeErr := r.syncRuntime(ctx, kyma)
	runtimeModules := kyma.Status.RuntimeModules
	var ownerKyma *v1beta2.Kyma // what the owner chose there counts once it is read
	if runtimeErr == nil {
		runtimeModules = runtimeKyma.Spec.Modules
		ownerKyma = runtimeKyma
	}
	owner := ownerChoicesOf(kyma, ownerKyma, runtimeModules)
	modules, removalsWait, writeErr, err := r.syncModules(ctx, kyma, runtimeModules, owner, runtimeErr == nil)
	if err != nil {
		return readFailed(err), false
	}
	r.descriptors.describeModules(ctx, r.templates(), modules)
	// Read Manifests again so that status reflects what was just written.
	current, err := r.manifests(ctx, kyma)
	if err != nil {
		return readFailed(err), false
	}
	setModuleStatuses(kyma, modules, current, r.ready, r.now())
	kyma.Status.RuntimeModules = runtimeModules
	if r.Liveness != nil {
		setWatcherReporting(&kyma.Status.Conditions, r.Liveness.AgentLiveness(kyma, r.now()))
	}
	o = outcomeOf(kyma, observed{Modules: kyma.Status.Modules, RuntimeErr: runtimeErr, WriteErr: writeErr, Recreating: recreate}, r.Intervals)
	o = r.readyAfter(ctx, kyma, o)
	o = wakeForWindows(o, modules, r.now())
	if removalsWait {
		o = soonest(o, removalStep)
	}

	if runtimeErr == nil && !recreate {
		// The runtime's owner sees what is about to be recorded.
		recorded := kyma.DeepCopy()
		recordOutcome(recorded, o)
		if r.progress.hold(kyma.UID, stored, &recorded.Status, o, time.Now()) {
			updateMetrics(recorded)
			return o, true
		}
		if err := mirrorStatus(ctx, cluster, runtimeKyma, recorded); err != nil {
			r.evictOnError(kyma, err)
			return runtimeOutcome(kyma, fmt.Errorf("mirroring status to the runtime: %w", err)), false
		}
		// Recorded once: the skeleton records o again on this status and
		// finds nothing to change, so a transition keeps the times the
		// runtime got. Recorded afresh it took a later now (lastOperation,
		// condition times), a second apart from the mirror's about one time
		// in ten, and the mirror was written again at the next interval: an
		// idle runtime write.
		kyma.Status = recorded.Status
	}
	return o, false
}

// syncModules resolves the Kyma's modules (its own and those the runtime's
// Kyma lists) and keeps one Manifest per module. Manifests of modules no
// longer wanted are deleted, unless the runtime could not be read (its
// list is then the last one read, and an outage must not uninstall).
// A Manifest is deleted only once the Kyma's stored status carries its
// removal, and created only once it carries none (kyma_history.go);
// removalsWait says that one waits for this reconcile's status write.
// Failed Manifest writes are returned as writeErr and also reported on
// their module; err is a failed read, which stops everything.
func (r *Reconciler) syncModules(ctx context.Context, kyma *v1beta2.Kyma, runtimeModules []v1beta2.Module, owner ownerChoices, runtimeRead bool) (modules []resolve.Module, removalsWait bool, writeErr, err error) {
	existing, err := r.manifests(ctx, kyma)
	if err != nil {
		return nil, false, nil, err
	}
	catalog, err := r.catalog.get(ctx)
	if err != nil {
		return nil, false, nil, err
	}
	stored := kyma.Status.Modules
	effective := kyma.DeepCopy()
	effective.Spec.Modules = unionModules(kyma.Spec.Modules, runtimeModules)
	fromRuntime := runtimeOnlyModules(kyma.Spec.Modules, runtimeModules)
	modules = resolve.Resolve(effective, catalog, installedVersions(existing))
	var rollouts []v1beta2.ModuleRollout
	if r.Rollouts {
		if rollouts, err = r.rollouts(ctx, kyma.Namespace); err != nil {
			return nil, false, nil, err
		}
	}

	desired := map[string]bool{}
	var writeErrs []error
	changes := &moduleChanges{}
	defer r.reportChanges(kyma, changes)
	for i := range modules {
		module := &modules[i]
		desired[ManifestName(kyma.Name, module.Name)] = true
		current := existing[ManifestName(kyma.Name, module.Name)]
		if !r.applyHolds(holdCase{kyma: kyma, module: module, existing: current, fromRuntime: fromRuntime[module.Name], owner: owner, rollouts: rollouts, catalog: catalog, now: r.now()}) {
			continue // the Manifest stays as it is
		}
		if current == nil && removalNoted(stored, module.Name) {
			removalsWait = true // its last removal is recorded first
			continue
		}
		if err := r.syncManifest(ctx, kyma, module, current, changes); err != nil {
			module.Err = err
			if !errors.Is(err, ocm.ErrInvalid) {
				writeErrs = append(writeErrs, err)
			} // else: the template's to fix; the module's Error brings the Kyma back at the Error interval, a template change at once
		}
	}
	for name, m := range existing {
		if desired[name] || !runtimeRead {
			continue
		}
		if !removalNoted(stored, moduleOf(m)) {
			removalsWait = true // this reconcile's status write stores the removal
			continue
		}
		if err := r.deleteManifest(ctx, m, false, changes); err != nil {
			writeErrs = append(writeErrs, err)
		}
	}
	return modules, removalsWait, errors.Join(writeErrs...), nil
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// readFailed is the outcome of a failed read in the control plane.
func readFailed(err error) reconciler.Outcome {
	return reconciler.Retry(ReasonReadFailed,
		fmt.Sprintf("Reading the Kyma's Manifests or the module catalog failed (%s); retrying", reconciler.Cause(err)), err)
}

// syncRuntime keeps the runtime's CRDs and its own Kyma in step. It returns
// the runtime, its Kyma, and whether that Kyma is being recreated.
func (r *Reconciler) syncRuntime(ctx context.Context, kyma *v1beta2.Kyma) (*remote.Cluster, *v1beta2.Kyma, bool, error) {
	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if err != nil {
		return nil, nil, false, err
	}
	if err := r.runtimeSide.syncCRDs(ctx, cluster); err != nil {
		r.evictOnError(kyma, err)
		return nil, nil, false, err
	}
	runtimeKyma, recreate, err := syncRuntimeKyma(ctx, cluster, kyma, runtimeKymaKey(kyma, r.SyncNamespace))
	if err != nil {
		r.evictOnError(kyma, err)
		return nil, nil, false, err
	}
	if err := r.takeOverRuntime(ctx, cluster, kyma, runtimeKyma); err != nil {
		r.evictOnError(kyma, err)
		return nil, nil, false, err
	}
	return cluster, runtimeKyma, recreate, nil
}

// evictOnError forgets a runtime's client and sync state after an error
// that says the runtime cannot be used, and the sync state after one that
// says it lacks what was synced, so the next attempt starts afresh.
func (r *Reconciler) evictOnError(kyma *v1beta2.Kyma, err error) {
	r.Runtimes.EvictOnError(kyma.Name, err)
}

// finalize deletes every Manifest of the Kyma, which uninstalls its modules
// from the runtime, and lets the Kyma go once they are all gone. Until then
// each module stays in status.modules as Deleting, with what blocks it, and
// the runtime's own Kyma shows the same, from before the first Manifest is
// deleted until it is itself removed, last (kyma_deletion.go). It
// waits on nothing that a pause stops: the Manifest controller removes a
// Manifest being deleted even when its Kyma is paused.
func (r *Reconciler) finalize(ctx context.Context, kyma *v1beta2.Kyma) reconciler.Outcome {
	r.progress.forget(kyma.UID)
	existing, err := r.manifests(ctx, kyma)
	if err != nil {
		return readFailed(err)
	}
	if len(existing) > 0 {
		// As in syncModules: a Manifest goes once the stored status
		// carries its removal (kyma_history.go).
		stored := kyma.Status.Modules
		kyma.Status.Modules = removalStatuses(kyma, existing, nil)
		noteRemovals(kyma, stored, existing, metav1.NewTime(r.now()))
		o := reconciler.Deleting(ReasonDeleting,
			fmt.Sprintf("Waiting for %d modules to be removed from the runtime; see status.modules", len(existing)),
			r.Intervals.After(v1beta2.StateDeleting))
		// The runtime's owner sees the deletion before any module goes
		// (kyma_deletion.go).
		if err := r.showDeleting(ctx, kyma, o); err != nil {
			return runtimeOutcome(kyma, err)
		}
		var deleteErrs []error
		removalsWait := false
		changes := &moduleChanges{}
		for _, m := range existing {
			if !removalNoted(stored, moduleOf(m)) {
				removalsWait = true
				continue
			}
			if err := r.deleteManifest(ctx, m, false, changes); err != nil {
				deleteErrs = append(deleteErrs, err)
			}
		}
		r.reportChanges(kyma, changes)
		if err := errors.Join(deleteErrs...); err != nil {
			return reconciler.Retry(ReasonDeleting,
				fmt.Sprintf("Deleting the modules' Manifests failed (%s); retrying", reconciler.Cause(err)), err)
		}
		if removalsWait {
			o = soonest(o, removalStep)
		}
		return o
	}
	if err := r.removeRuntimeKyma(ctx, kyma); err != nil {
		return runtimeOutcome(kyma, err)
	}
	r.Runtimes.Evict(kyma.Name)
	forgetMetrics(kyma.Name)
	return reconciler.Done()
}

// removeRuntimeKyma deletes the runtime's own Kyma once all modules are gone.
// A runtime that is gone for good (its Secret deleted) has nothing to remove.
func (r *Reconciler) removeRuntimeKyma(ctx context.Context, kyma *v1beta2.Kyma) error {
	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if errors.Is(err, remote.ErrNoKubeconfigSecret) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := deleteRuntimeKyma(ctx, cluster.Client, runtimeKymaKey(kyma, r.SyncNamespace)); err != nil {
		r.evictOnError(kyma, err)
		return fmt.Errorf("deleting the runtime's Kyma: %w", err)
	}
	return nil
}

// manifests returns the Kyma's Manifests by name.
func (r *Reconciler) manifests(ctx context.Context, kyma *v1beta2.Kyma) (map[string]*v1beta2.Manifest, error) {
	list := &v1beta2.ManifestList{}
	if err := r.List(ctx, list, client.InNamespace(kyma.Namespace), index.OfKyma(kyma.Name)); err != nil {
		return nil, fmt.Errorf("listing Manifests: %w", err)
	}
	out := make(map[string]*v1beta2.Manifest, len(list.Items))
	for i := range list.Items {
		if !isKLMManifest(&list.Items[i]) {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out, nil
}

// deleteManifest deletes a Manifest (after marking it to leave the module's
// resources in place, when unmanage) and records the removal in changes.
func (r *Reconciler) deleteManifest(ctx context.Context, m *v1beta2.Manifest, unmanage bool, changes *moduleChanges) error {
	if unmanage && m.Annotations[v1beta2.UnmanageAnnotation] != "true" {
		// A merge patch of one annotation: it sends that key alone, and
		// touches no list another writer may have changed.
		patch := client.MergeFrom(m.DeepCopy())
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[v1beta2.UnmanageAnnotation] = "true"
		if err := r.Patch(ctx, m, patch); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if !m.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Manifest %s: %w", m.Name, err)
	}
	changes.remove(m.Spec.ModuleName)
	return nil
}

func kymaStatus(k *v1beta2.Kyma) any { return &k.Status }

func installedVersions(manifests map[string]*v1beta2.Manifest) map[string]string {
	installed := make(map[string]string, len(manifests))
	for _, m := range manifests {
		if m.Spec.ModuleName != "" && m.Spec.Version != "" {
			installed[m.Spec.ModuleName] = m.Spec.Version
		}
	}
	return installed
}

// Package manifest carries out Manifests: it fetches and renders a module's
// content, applies it to the Kyma's runtime, keeps the inventory, prunes, and
// reports readiness (SPEC R3, R5).
package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/access"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/awaits"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
	"github.com/runtime-fleet/lifecycle-manager/internal/drift"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/priority"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	watchercontroller "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
)

// Renderer turns a Manifest's content into the objects to apply, labelled and
// namespaced for the runtime: objects that name no namespace go to
// syncNamespace. namespaced answers whether a kind is namespaced in the
// runtime.
type Renderer interface {
	Render(ctx context.Context, manifest *v1beta2.Manifest, syncNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) ([]*unstructured.Unstructured, error)
}

// Reconciler reconciles Manifests.
type Reconciler struct {
	client.Client
	Runtimes      remote.Runtimes
	Renderer      Renderer
	Recorder      events.EventRecorder
	Intervals     requeue.Intervals
	SyncNamespace string
	// Pause tells Kymas whose runtimes must not be touched.
	Pause pause.Policy
	// ReconcileTimeout bounds one reconcile; zero means none.
	ReconcileTimeout time.Duration
	// Reporting, when set, tells whether the runtime watcher reports
	// changes to a module's objects; while it does, a Ready Manifest is
	// checked every ReportedReadyFactor Ready intervals instead of every
	// one (manifest_reporting.go). A factor of 1 or less keeps the Ready
	// interval.
	Reporting           Reporting
	ReportedReadyFactor int
	// Access configures the modules' identities (manifest_access.go).
	Access AccessOptions
	// Takeover says which Kymas' modules this operator takes over from the
	// Kyma lifecycle-manager (manifest_takeover.go).
	Takeover takeover.Policy
	// Orphans is what happens to the module's own custom resources that
	// wait for finalizers while the module's manager is gone
	// (manifest_orphans.go).
	Orphans OrphanedFinalizers
	// Clock dates the operation history and lastOperation, so that they
	// agree with the Kyma controller's windows and the rollout planner
	// under one injected clock; the real one when nil. Token lifetimes
	// and requeues stay on real time: they are durations the API server
	// and the workqueue measure.
	Clock clock.PassiveClock

	// events reports raw errors, rate limited; made from Recorder.
	events *reconciler.Events
	// wakes bring a Manifest back at once when its runtime frees a slot
	// or an object it waits for changes there (awaits).
	wakes  *priority.Wakes
	awaits *awaits.Awaits
	// verified is what the last full reconcile of each Manifest found in
	// its runtime, and listings the reads its Kyma's checks share
	// (manifest_drift.go).
	verified drift.Memory
	listings *drift.Listings
	// repaired holds, by Manifest UID, that the reconcile in flight put
	// back objects someone changed in the runtime: a drift repair for the
	// operation history (manifest_history.go).
	repaired sync.Map
	// goneSince holds, by Manifest UID, when this process first saw the
	// module's manager gone while the module's custom resources waited
	// (manifest_orphans.go); notes, what the reconcile in flight did on
	// its own authority, for the operation history.
	goneSince sync.Map
	notes     pendingNotes
	// checks holds the Ready Manifests until their next periodic check
	// (manifest_checks.go); nil without a manager.
	checks *checks
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// Reconcile runs the one skeleton (internal/reconciler) on the Manifest.
// The Kyma decides whether this operator works on it at all: not while the
// Kyma is paused, and not when the Kyma is gone or outside the operator's
// selection (another operator's). A Manifest being deleted is cleaned up in
// either case, so that it cannot hang on its finalizer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	manifest := &v1beta2.Manifest{}
	if err := r.Get(ctx, req.NamespacedName, manifest); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	metrics.ManifestReconciles.Inc()

	// The Kyma is only read (its pause), so the cache's own copy will do.
	kyma := &v1beta2.Kyma{}
	err := r.Get(ctx, client.ObjectKey{Namespace: manifest.Namespace, Name: kymaName(manifest)}, kyma, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		if manifest.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, nil
		}
		kyma = nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if takeover.IsKLMManifest(manifest) {
		// The Kyma lifecycle-manager's: never installed from, only
		// released once taken over (manifest_takeover.go).
		return r.releasePredecessor(ctx, manifest, kyma)
	}
	return reconciler.Run(ctx, r.Client, manifest, r.phases(kyma))
}

func (r *Reconciler) phases(kyma *v1beta2.Kyma) reconciler.Phases[*v1beta2.Manifest] {
	return reconciler.Phases[*v1beta2.Manifest]{
		Controller: "manifest",
		Finalizer:  v1beta2.ManifestFinalizer,
		Gate:       r.gate,
		Deadline:   r.ReconcileTimeout,
		Paused:     func(*v1beta2.Manifest) bool { return kyma != nil && r.Pause.Paused(kyma) },
		PausedFor: func(*v1beta2.Manifest) time.Duration {
			if kyma == nil {
				return 0
			}
			return r.Pause.Wake(kyma)
		},
		Delete:    r.uninstall,
		Reconcile: r.install,
		Record:    r.recordWithHistory(kyma),
		Status:    func(m *v1beta2.Manifest) any { return &m.Status },
		Events:    r.events,
	}
}

// gate takes a worker slot of the Manifest's runtime: a runtime that already
// has its share of workers waits its turn without holding one.
func (r *Reconciler) gate(_ context.Context, manifest *v1beta2.Manifest) (func(), time.Duration) {
	key := client.ObjectKeyFromObject(manifest)
	return remote.Gate(r.Runtimes, "manifest", kymaName(manifest), key.String(), func() { r.wakes.Wake(key) })
}

// install brings the module to the Manifest's spec: fetch and render,
// apply, prune, default CR, readiness. Every failure ends in an Outcome;
// none of them deletes what is installed.
func (r *Reconciler) install(ctx context.Context, manifest *v1beta2.Manifest) (o reconciler.Outcome) {
	r.repaired.Delete(manifest.UID)
	cluster, o := r.cluster(ctx, manifest)
	if cluster == nil {
		return o
	}
	// Whatever the install comes to, a module whose operator runs in the
	// control plane keeps a valid token: a content or runtime failure must
	// not also cut its operator off the runtime.
	defer func() { o = r.keepToken(ctx, cluster, manifest, o) }()
	if o, ok := r.takeOver(ctx, cluster, manifest); !ok {
		return o
	}
	if r.unchanged(ctx, cluster, manifest) {
		return r.next(ctx, cluster, manifest, r.moduleState(ctx, cluster, manifest, nil))
	}
	if err := remote.EnsureSyncNamespace(ctx, cluster, r.syncNamespace(manifest)); err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return runtimeUnavailable(err)
	}
	objects, err := r.Renderer.Render(ctx, manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	keepRenderRefusal(manifest, err)
	if err != nil {
		// Content that cannot be fetched or rendered, or whose signature
		// is refused, never leads to pruning: what is installed stays
		// installed.
		if o, ok := signatureInvalid(err, r.Intervals); ok {
			return o
		}
		return contentFailed(err)
	}
	r.verified.Forget(manifest.UID)
	// Ownership is decided before anything is written or granted: the
	// identity's rights come from what the module owns, never from what
	// its content names.
	plan, o, ok := r.plan(ctx, cluster, manifest, objects)
	if !ok {
		return o
	}
	// A CRD that drops a version objects are stored at is migrated first;
	// when that fails, nothing of the new version is applied.
	if o, ok := r.migrateStoredVersions(ctx, cluster, manifest, plan); !ok {
		return o
	}
	writer, grantPending, o, ok := r.prepareWriter(ctx, cluster, manifest, plan)
	if !ok {
		return o
	}
	observed := &apply.Observed{}
	newKinds, o, ok := r.applyAndPrune(ctx, cluster, observed.Client(writer), grantPending, manifest, plan)
	if !ok {
		return o
	}
	r.verify(cluster, manifest, observed.Verified(manifest.Status.Synced))
	return r.next(ctx, cluster, manifest, r.moduleState(ctx, cluster, manifest, newKinds))
}

// moduleState makes sure the module's default custom resource exists and
// tells how ready the module is. newKinds are the kinds whose CRDs this
// reconcile created.
func (r *Reconciler) moduleState(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, newKinds []schema.GroupKind) reconciler.Outcome {
	cr, err := defaultCustomResource(manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil {
		return reconciler.Retry(ReasonApplyFailed, defaultCRUnknownMessage(err), err)
	}
	if o, held := r.newKindHeld(cluster, cr, newKinds); held {
		return o
	}
	finalizing, err := r.ensureDefaultCustomResources(ctx, cluster, manifest, cr)
	if err != nil {
		if o, ok := accessRefused(manifest, err, r.Intervals); ok {
			r.refused(cluster, manifest)
			return o
		}
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return reconciler.Retry(ReasonApplyFailed, failedMessage("Creating the module's default custom resource", err), err)
	}
	readiness, err := moduleReadiness(ctx, cluster.Client, manifest, cr, r.syncNamespace(manifest))
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return reconciler.Retry(ReasonReadinessFailed, failedMessage("Reading the module's readiness", err), err)
	}
	if len(finalizing) > 0 && readiness.State != v1beta2.StateError {
		return replacingDefaultCustomResources(finalizing, r.Intervals.After(v1beta2.StateProcessing))
	}
	o := readinessOutcome(readiness, r.Intervals)
	if o.Kind == reconciler.KindProgressing && r.awaits.Await(cluster, kymaName(manifest), client.ObjectKeyFromObject(manifest), readiness.Pending) {
		// The runtime tells when the object changes; the poll only backs
		// up a watch that failed.
		o.After *= awaitedPollFactor
	}
	return o
}

// newKindHeld tells whether the default custom resource must wait before it
// is created: its kind's CRD was created by this reconcile, or so recently
// that the runtime's API server would hold the create (remote.NewKindHold).
// Created now, it would hold the worker and the runtime's slot for that
// long inside the request; the requeue holds neither. A reconcile that
// created the CRD always ends here, so that what it does is the same on a
// loaded machine as on an idle one.
func (r *Reconciler) newKindHeld(cluster *remote.Cluster, cr *unstructured.Unstructured, newKinds []schema.GroupKind) (reconciler.Outcome, bool) {
	if cr == nil {
		return reconciler.Outcome{}, false
	}
	kind := cr.GroupVersionKind().GroupKind()
	held := cluster.CreateHeld(kind, time.Now())
	if held <= 0 && !slices.Contains(newKinds, kind) {
		return reconciler.Outcome{}, false
	}
	return reconciler.Progressing(ReasonProcessing, newKindMessage(kind), max(held, minNewKindRequeue)), true
}

// minNewKindRequeue is the requeue of a reconcile that created the default
// custom resource's CRD after its hold had passed (a slow reconcile).
const minNewKindRequeue = 10 * time.Millisecond

// newKindMessage is what a Manifest says while its default custom resource
// waits for its new kind (newKindHeld).
func newKindMessage(kind schema.GroupKind) string {
	return fmt.Sprintf("Waiting for the runtime's API servers to serve the module's new kind %s before creating its default custom resource", kind)
}

// awaitedPollFactor stretches the Processing interval of a Manifest whose
// awaited object is watched (internal/awaits).
const awaitedPollFactor = 15

// moduleReady tells, reading only, whether the module's default custom
// resource exists, its record is current and the module is Ready: what
// moduleState would find for a module whose objects are unchanged, without
// creating or deleting anything.
func (r *Reconciler) moduleReady(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) bool {
	cr, err := defaultCustomResource(manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil {
		return false
	}
	if r.defaultResourcesStale(ctx, cluster, manifest, cr) {
		return false
	}
	reader := watchDefault(cluster.Client, cr)
	readiness, err := moduleReadiness(ctx, reader, manifest, cr, r.syncNamespace(manifest))
	return err == nil && readiness.State == v1beta2.StateReady && !r.defaultRecordChanged(manifest, cr, reader)
}

// plan decides, reading the runtime as the connection's user, what the
// module may do with each object of its content (internal/apply Plan);
// ok is false when the reconcile must end with o: the content names
// objects the module may not write. Nothing is then applied, pruned or
// granted.
func (r *Reconciler) plan(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, objects []*unstructured.Unstructured) (*apply.Plan, reconciler.Outcome, bool) {
	plan, err := apply.PlanModule(ctx, cluster.Client, objects, r.owner(manifest), manifest.Status.Synced)
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return nil, reconciler.Retry(ReasonApplyFailed, failedMessage("Reading what exists of the module's resources in the runtime", err), err), false
	}
	plan.Refuse(r.limits(manifest))
	// A drift correction of applied content diffs each object first, so
	// that only what drifted is written and reported.
	plan.NewContent = !installed(manifest)
	if conflicts := plan.Conflicts(); len(conflicts) > 0 {
		// Someone else's objects, or objects no module may write: only a
		// person can resolve it, in the runtime (not watched) or in the
		// module, so look again at the Error interval rather than back off.
		return nil, ownershipConflict(&apply.ConflictError{Conflicts: conflicts}, r.Intervals), false
	}
	return plan, reconciler.Outcome{}, true
}

// limits are what the Manifest's module may not write, whoever holds the
// object: the namespace of the operator's identities, Pods that run as an
// identity of the operator's, and, for a module with an identity,
// anything outside the namespaces it created.
func (r *Reconciler) limits(manifest *v1beta2.Manifest) apply.Limits {
	_, declared := r.identity(manifest)
	syncNamespace := r.syncNamespace(manifest)
	return apply.Limits{
		OwnNamespacesOnly:  declared,
		ReservedNamespaces: []string{access.ServiceAccountNamespace},
		ReservedServiceAccount: func(namespace, name string) bool {
			return (namespace == syncNamespace && name == watchercontroller.AgentServiceAccount) || access.IsIdentityServiceAccount(name, syncNamespace)
		},
	}
}

// applyAndPrune applies the planned objects and prunes what the module no
// longer ships, writing through writer; ok is false when the reconcile must
// end with o. grantPending, when set, runs once the content's cluster
// definitions (its Namespaces) are applied. newKinds are the kinds whose
// CRDs the apply created.
func (r *Reconciler) applyAndPrune(ctx context.Context, cluster *remote.Cluster, writer client.Client, grantPending func(context.Context) error, manifest *v1beta2.Manifest, plan *apply.Plan) (newKinds []schema.GroupKind, o reconciler.Outcome, ok bool) {
	log := ctrl.LoggerFrom(ctx)
	objects := plan.Objects
	applier := apply.NewApplier(writer, cluster.Mapper)
	applier.AfterStaged = grantPending
	applied, err := applier.ApplyPlan(ctx, plan)
	if o, ok := accessRefused(manifest, err, r.Intervals); ok {
		r.refused(cluster, manifest)
		return nil, o, false
	}
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return nil, reconciler.Retry(ReasonApplyFailed, failedMessage("Applying the module's resources to the runtime", err), err), false
	}
	cluster.KindsEstablished(applied.NewKinds, time.Now())
	if applied.Changed > 0 {
		log.Info("Applied module resources", "changed", applied.Changed, "total", len(objects))
		if installed(manifest) {
			r.events.Normal(manifest, ReasonDriftCorrected, fmt.Sprintf("Corrected drift in the runtime: applied %d of %d resources", applied.Changed, len(objects)))
			r.repaired.Store(manifest.UID, true)
		}
	}
	if len(applied.UsedAsIs) > 0 {
		log.V(1).Info("Using existing Namespaces as they are", "namespaces", applied.UsedAsIs)
	}
	if len(applied.Adopted) > 0 {
		log.Info("Adopted existing objects, as the module allows", "objects", applied.Adopted)
		r.events.Normal(manifest, "ResourcesAdopted", "Adopted existing objects, as the module allows: "+shortList(applied.Adopted))
	}

	removal, err := applier.PruneModule(ctx, manifest.Status.Synced, applied.Inventory, r.removeOptions(manifest))
	manifest.Status.Synced = append(applied.Inventory, removal.Kept...) //nolint:gocritic // Inventory is ours to extend
	r.reportRemoval(ctx, manifest, removal)
	if o, ok := accessRefused(manifest, err, r.Intervals); ok {
		r.refused(cluster, manifest)
		return nil, o, false
	}
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return nil, reconciler.Retry(ReasonPruneFailed, failedMessage("Removing resources the module no longer ships", err), err), false
	}
	return applied.NewKinds, reconciler.Outcome{}, true
}

// ensureCustomResource creates the module's default custom resource when it
// is absent, as the module's identity; one that exists is used as it is.
// It says what it found or did; with no cr (Ignore, or none in the
// module), CustomResourceNotOurs: there is none of the module's to use.
func (r *Reconciler) ensureCustomResource(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, cr *unstructured.Unstructured) (apply.CustomResourceState, error) {
	if cr == nil {
		return apply.CustomResourceNotOurs, nil
	}
	c, err := r.writer(cluster, manifest)
	if err != nil {
		return 0, err
	}
	state, err := apply.EnsureCustomResource(ctx, c, cr, r.owner(manifest))
	if err != nil {
		return 0, err
	}
	switch state {
	case apply.CustomResourceCreated:
		// Again only if it existed: an install that waited for its kind
		// (newKindHeld) is installed before its first one is created.
		if installed(manifest) && isRecorded(manifest, resourceOf(cr)) {
			r.events.Normal(manifest, "CustomResourceCreated", fmt.Sprintf("Created %s %s again: it was missing", cr.GetKind(), cr.GetName()))
			r.repaired.Store(manifest.UID, true)
		}
	case apply.CustomResourceNotOurs:
		ctrl.LoggerFrom(ctx).V(1).Info("The default custom resource exists and is not the module's; using it, never deleting it",
			"kind", cr.GetKind(), "namespace", cr.GetNamespace(), "name", cr.GetName())
	case apply.CustomResourceExists:
	}
	return state, nil
}

// cluster returns the Manifest's runtime, or nil and the Outcome that says
// why it cannot be used.
func (r *Reconciler) cluster(ctx context.Context, manifest *v1beta2.Manifest) (*remote.Cluster, reconciler.Outcome) {
	name := kymaName(manifest)
	if name == "" {
		err := fmt.Errorf("manifest has no %s label", v1beta2.KymaNameLabel)
		return nil, reconciler.Stalled(ReasonRuntimeUnavailable, "The Manifest has no "+v1beta2.KymaNameLabel+" label; it names the Kyma whose runtime it installs to", err)
	}
	cluster, err := r.Runtimes.Get(ctx, name)
	switch {
	case errors.Is(err, remote.ErrKubeconfigRefused):
		return nil, kubeconfigRefused(err, r.Intervals)
	case err != nil:
		return nil, runtimeUnavailable(err)
	}
	return cluster, reconciler.Outcome{}
}

// syncNamespace is the runtime namespace of the Manifest's objects that name
// none: the Kyma's own choice, else the operator's.
func (r *Reconciler) syncNamespace(manifest *v1beta2.Manifest) string {
	if manifest.Spec.SyncNamespace != "" {
		return manifest.Spec.SyncNamespace
	}
	return r.SyncNamespace
}

func kymaName(manifest *v1beta2.Manifest) string {
	return manifest.Labels[v1beta2.KymaNameLabel]
}

// namespacedFunc answers from the runtime's REST mapper whether a kind is
// namespaced.
func namespacedFunc(mapper meta.RESTMapper) func(schema.GroupVersionKind) (bool, error) {
	return transform.RESTMapperScope(mapper)
}

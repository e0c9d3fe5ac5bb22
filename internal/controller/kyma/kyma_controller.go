// Package kyma reconciles Kymas: it resolves each module to one
// ModuleTemplate, keeps one Manifest per module, and aggregates the modules'
// states into the Kyma's status (SPEC R1, R2, R4, R5).
package kyma

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
	"github.com/runtime-fleet/lifecycle-manager/internal/statuspatch"
)

// Pinner turns a content link into a digest-pinned one, so that every runtime
// gets the same bytes whatever happens to tags later.
type Pinner interface {
	Pin(ctx context.Context, resource v1beta2.ContentResource) (v1beta2.ContentResource, error)
}

// Reconciler reconciles Kymas.
type Reconciler struct {
	client.Client
	Runtimes  remote.Runtimes
	Pinner    Pinner
	Recorder  events.EventRecorder
	Intervals requeue.Intervals
	// SyncNamespace is where the runtime's own Kyma lives, unless the Kyma
	// names its own sync namespace.
	SyncNamespace string
	// Pause tells Kymas whose runtimes must not be touched.
	Pause pause.Policy
	// ReconcileTimeout bounds one reconcile; zero means none.
	ReconcileTimeout time.Duration

	catalog     *catalogSnapshot
	ready       *readyClock
	runtimeSide *runtimeSide
}

// Reconcile follows the house skeleton: get, deletion, finalizer, pause, then
// reconcile, with one status patch at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kyma := &v1beta2.Kyma{}
	if err := r.Get(ctx, req.NamespacedName, kyma); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	metrics.KymaReconciles.Inc()

	// A runtime that already has its share of workers waits its turn
	// without holding one; status is left as it is meanwhile.
	release, ok := r.Runtimes.TryAcquire("kyma", kyma.Name)
	if !ok {
		return ctrl.Result{RequeueAfter: remote.RetryAfter()}, nil
	}
	defer release()
	rctx, cancel := remote.WithReconcileDeadline(ctx, r.ReconcileTimeout)
	defer cancel()

	if !kyma.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(kyma, v1beta2.KymaFinalizer) {
			return ctrl.Result{}, nil
		}
		return r.finalize(rctx, kyma)
	}

	if !controllerutil.ContainsFinalizer(kyma, v1beta2.KymaFinalizer) {
		patch := client.MergeFrom(kyma.DeepCopy())
		controllerutil.AddFinalizer(kyma, v1beta2.KymaFinalizer)
		if err := r.Patch(ctx, kyma, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	base := kyma.DeepCopy()
	if r.Pause.Paused(kyma) {
		setPaused(kyma)
		return ctrl.Result{}, statuspatch.IfChanged(ctx, r.Client, base, kyma, kymaStatus)
	}
	result, reconcileErr := r.reconcile(rctx, kyma)
	if err := statuspatch.IfChanged(ctx, r.Client, base, kyma, kymaStatus); err != nil {
		return ctrl.Result{}, errors.Join(reconcileErr, err)
	}
	metrics.CountRequeue("kyma", kyma.Status.State, reconcileErr)
	return result, reconcileErr
}

func (r *Reconciler) reconcile(ctx context.Context, kyma *v1beta2.Kyma) (ctrl.Result, error) {
	// The runtime side first: its module list is half of what to install.
	// When the runtime cannot be read, the last list read stands in, and
	// nothing is uninstalled because of the outage.
	rc, runtimeKyma, recreate, runtimeErr := r.syncRuntime(ctx, kyma)
	runtimeModules := kyma.Status.RuntimeModules
	if runtimeErr == nil {
		runtimeModules = runtimeKyma.Spec.Modules
	}

	existing, err := r.manifests(ctx, kyma)
	if err != nil {
		return ctrl.Result{}, err
	}
	catalog, err := r.catalog.get(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	effective := kyma.DeepCopy()
	effective.Spec.Modules = unionModules(kyma.Spec.Modules, runtimeModules)
	fromRuntime := runtimeOnlyModules(kyma.Spec.Modules, runtimeModules)
	modules := resolve.Resolve(effective, catalog, installedVersions(existing))

	desired := map[string]bool{}
	var syncErrs []error
	for i := range modules {
		module := &modules[i]
		desired[ManifestName(kyma.Name, module.Name)] = true
		if err := refuseUntrusted(module, fromRuntime[module.Name]); err != nil {
			module.Err = err // reported on the module; what is installed stays
			continue
		}
		if err := r.syncManifest(ctx, kyma, module, existing[ManifestName(kyma.Name, module.Name)]); err != nil {
			module.Err = err
			syncErrs = append(syncErrs, err)
		}
	}
	for name, m := range existing {
		if desired[name] || runtimeErr != nil {
			continue
		}
		if err := r.deleteManifest(ctx, kyma, m, false); err != nil {
			syncErrs = append(syncErrs, err)
		}
	}

	// Read Manifests again so that status reflects what was just written.
	current, err := r.manifests(ctx, kyma)
	if err != nil {
		return ctrl.Result{}, err
	}
	setStatus(kyma, modules, current, runtimeErr, r.ready)
	kyma.Status.RuntimeModules = runtimeModules
	updateMetrics(kyma)

	if runtimeErr == nil && !recreate {
		if err := mirrorStatus(ctx, rc, runtimeKyma, kyma); err != nil {
			syncErrs = append(syncErrs, fmt.Errorf("mirroring status to the runtime: %w", err))
		}
	}
	if runtimeErr != nil {
		if errors.Is(runtimeErr, remote.ErrKubeconfigRefused) && len(syncErrs) == 0 {
			// Retrying cannot help: only a new Secret can, and a change of
			// the Secret requeues the Kyma.
			return ctrl.Result{}, reconcile.TerminalError(runtimeErr)
		}
		syncErrs = append(syncErrs, runtimeErr)
	}
	if err := errors.Join(syncErrs...); err != nil {
		return ctrl.Result{}, err
	}
	if recreate {
		return ctrl.Result{RequeueAfter: r.Intervals.After(v1beta2.StateProcessing)}, nil
	}
	return ctrl.Result{RequeueAfter: r.Intervals.After(kyma.Status.State)}, nil
}

// syncRuntime keeps the runtime's CRDs and its own Kyma in step. It returns
// the runtime's client, its Kyma, and whether that Kyma is being recreated.
func (r *Reconciler) syncRuntime(ctx context.Context, kyma *v1beta2.Kyma) (client.Client, *v1beta2.Kyma, bool, error) {
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
	return cluster.Client, runtimeKyma, recreate, nil
}

// evictOnError forgets a runtime's client and sync state after an error
// that says the runtime cannot be used, and the sync state after one that
// says it lacks what was synced, so the next attempt starts afresh.
func (r *Reconciler) evictOnError(kyma *v1beta2.Kyma, err error) {
	r.Runtimes.EvictOnError(kyma.Name, err)
}

// finalize deletes every Manifest of the Kyma, which uninstalls its modules
// from the runtime, and lets the Kyma go once they are all gone.
func (r *Reconciler) finalize(ctx context.Context, kyma *v1beta2.Kyma) (ctrl.Result, error) {
	existing, err := r.manifests(ctx, kyma)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := kyma.DeepCopy()
	if len(existing) > 0 {
		for _, m := range existing {
			if err := r.deleteManifest(ctx, kyma, m, false); err != nil {
				return ctrl.Result{}, err
			}
		}
		setDeleting(kyma, existing)
		if err := statuspatch.IfChanged(ctx, r.Client, base, kyma, kymaStatus); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.Intervals.After(v1beta2.StateDeleting)}, nil
	}
	if err := r.removeRuntimeKyma(ctx, kyma); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFrom(kyma.DeepCopy())
	controllerutil.RemoveFinalizer(kyma, v1beta2.KymaFinalizer)
	if err := r.Patch(ctx, kyma, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	r.Runtimes.Evict(kyma.Name)
	forgetMetrics(kyma.Name)
	return ctrl.Result{}, nil
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
	if err := r.List(ctx, list, client.InNamespace(kyma.Namespace), client.MatchingLabels{v1beta2.KymaNameLabel: kyma.Name}); err != nil {
		return nil, fmt.Errorf("listing Manifests: %w", err)
	}
	out := make(map[string]*v1beta2.Manifest, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func (r *Reconciler) deleteManifest(ctx context.Context, kyma *v1beta2.Kyma, m *v1beta2.Manifest, unmanage bool) error {
	if unmanage && m.Annotations[v1beta2.UnmanageAnnotation] != "true" {
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
	r.event(kyma, corev1.EventTypeNormal, "ModuleRemoved", "Removing module "+m.Spec.ModuleName)
	return nil
}

func kymaStatus(k *v1beta2.Kyma) any { return &k.Status }

func (r *Reconciler) event(kyma *v1beta2.Kyma, eventType, reason, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(kyma, nil, eventType, reason, reason, "%s", note)
	}
}

func installedVersions(manifests map[string]*v1beta2.Manifest) map[string]string {
	installed := make(map[string]string, len(manifests))
	for _, m := range manifests {
		if m.Spec.ModuleName != "" && m.Spec.Version != "" {
			installed[m.Spec.ModuleName] = m.Spec.Version
		}
	}
	return installed
}

// Package manifest carries out Manifests: it fetches and renders a module's
// content, applies it to the Kyma's runtime, keeps the inventory, prunes, and
// reports readiness (SPEC R3, R5).
package manifest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/statuspatch"
)

// Renderer turns a Manifest's content into the objects to apply, labelled and
// namespaced for the runtime: objects that name no namespace go to
// syncNamespace. namespaced answers whether a kind is namespaced in the
// remote.
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
}

// Reconcile follows the house skeleton: get, deletion, finalizer, then
// reconcile, with one status patch at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	manifest := &v1beta2.Manifest{}
	if err := r.Get(ctx, req.NamespacedName, manifest); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	metrics.ManifestReconciles.Inc()

	// The Kyma decides whether this operator works on the Manifest at all:
	// not when the Kyma is outside its selection (another operator's) or
	// paused. A Manifest being deleted whose Kyma is gone is still cleaned
	// up, so that it cannot hang on its finalizer.
	kyma := &v1beta2.Kyma{}
	kymaErr := r.Get(ctx, client.ObjectKey{Namespace: manifest.Namespace, Name: kymaName(manifest)}, kyma)
	if kymaErr != nil && !apierrors.IsNotFound(kymaErr) {
		return ctrl.Result{}, kymaErr
	}
	kymaFound := kymaErr == nil
	if kymaFound && r.Pause.Paused(kyma) {
		return ctrl.Result{}, nil
	}

	// A runtime that already has its share of workers waits its turn
	// without holding one; status is left as it is meanwhile.
	release, ok := r.Runtimes.TryAcquire("manifest", kymaName(manifest))
	if !ok {
		return ctrl.Result{RequeueAfter: remote.RetryAfter()}, nil
	}
	defer release()
	rctx, cancel := remote.WithReconcileDeadline(ctx, r.ReconcileTimeout)
	defer cancel()

	if !manifest.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(manifest, v1beta2.ManifestFinalizer) {
			return ctrl.Result{}, nil
		}
		return r.finalize(rctx, manifest)
	}
	if !kymaFound {
		return ctrl.Result{}, nil
	}

	if !controllerutil.ContainsFinalizer(manifest, v1beta2.ManifestFinalizer) {
		patch := client.MergeFrom(manifest.DeepCopy())
		controllerutil.AddFinalizer(manifest, v1beta2.ManifestFinalizer)
		if err := r.Patch(ctx, manifest, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	base := manifest.DeepCopy()
	result, reconcileErr := r.reconcile(rctx, manifest)
	if err := statuspatch.IfChanged(ctx, r.Client, base, manifest, manifestStatus); err != nil {
		return ctrl.Result{}, errors.Join(reconcileErr, err)
	}
	metrics.CountRequeue("manifest", manifest.Status.State, reconcileErr)
	return result, reconcileErr
}

func (r *Reconciler) reconcile(ctx context.Context, manifest *v1beta2.Manifest) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cluster, err := r.cluster(ctx, manifest)
	if err != nil {
		setState(manifest, v1beta2.StateError, reasonRuntimeUnavailable, err.Error())
		return ctrl.Result{}, err
	}
	c := cluster.Client

	if err := remote.EnsureNamespace(ctx, c, r.syncNamespace(manifest)); err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		setState(manifest, v1beta2.StateError, reasonRuntimeUnavailable, err.Error())
		return ctrl.Result{}, err
	}

	objects, err := r.Renderer.Render(ctx, manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil {
		// Content that cannot be fetched or rendered never leads to pruning:
		// what is installed stays installed.
		setState(manifest, v1beta2.StateError, reasonContentFailed, err.Error())
		return ctrl.Result{}, err
	}

	applier := cluster.Applier()
	owner := r.owner(manifest)
	applied, err := applier.ApplyModule(ctx, objects, owner, manifest.Status.Synced)
	if conflict := (*apply.ConflictError)(nil); errors.As(err, &conflict) {
		// Someone else's objects: nothing was applied and nothing is pruned.
		// Only a person can resolve it, so look again at the Error interval
		// rather than back off.
		r.reportConflict(manifest, conflict)
		setState(manifest, v1beta2.StateError, reasonOwnershipConflict, conflict.Error())
		return ctrl.Result{RequeueAfter: r.Intervals.After(v1beta2.StateError)}, nil
	}
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		setState(manifest, v1beta2.StateError, reasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	if applied.Changed > 0 {
		log.Info("Applied module resources", "changed", applied.Changed, "total", len(objects))
		r.event(manifest, corev1.EventTypeNormal, "Applied", fmt.Sprintf("Applied %d of %d resources", applied.Changed, len(objects)))
	}
	if len(applied.UsedAsIs) > 0 {
		log.V(1).Info("Using existing Namespaces as they are", "namespaces", applied.UsedAsIs)
	}
	if len(applied.Adopted) > 0 {
		log.Info("Adopted existing objects, as the module allows", "objects", applied.Adopted)
		r.event(manifest, corev1.EventTypeNormal, "ResourcesAdopted", "Adopted existing objects, as the module allows: "+shortList(applied.Adopted))
	}

	removal, err := applier.PruneModule(ctx, manifest.Status.Synced, applied.Inventory, r.removeOptions(manifest))
	manifest.Status.Synced = append(applied.Inventory, removal.Kept...) //nolint:gocritic // Inventory is ours to extend
	r.reportRemoval(ctx, manifest, removal)
	if err != nil {
		setState(manifest, v1beta2.StateError, reasonPruneFailed, err.Error())
		return ctrl.Result{}, err
	}

	cr, err := defaultCustomResource(manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil {
		setState(manifest, v1beta2.StateError, reasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	if cr != nil {
		state, err := apply.EnsureCustomResource(ctx, c, cr, owner)
		if err != nil {
			setState(manifest, v1beta2.StateError, reasonApplyFailed, err.Error())
			return ctrl.Result{}, err
		}
		switch state {
		case apply.CustomResourceCreated:
			r.event(manifest, corev1.EventTypeNormal, "CustomResourceCreated", fmt.Sprintf("Created %s %s", cr.GetKind(), cr.GetName()))
		case apply.CustomResourceNotOurs:
			log.V(1).Info("The default custom resource exists and is not the module's; using it, never deleting it",
				"kind", cr.GetKind(), "namespace", cr.GetNamespace(), "name", cr.GetName())
		}
	}

	readiness, err := moduleReadiness(ctx, c, manifest, cr, r.syncNamespace(manifest))
	if err != nil {
		setState(manifest, v1beta2.StateError, reasonReadinessFailed, err.Error())
		return ctrl.Result{}, err
	}
	setReadiness(manifest, readiness)
	manifest.Status.ObservedGeneration = manifest.Generation
	return ctrl.Result{RequeueAfter: r.Intervals.After(manifest.Status.State)}, nil
}

// finalize removes the module from the runtime: the default custom resource
// first, then it waits until no custom resource of the module's CRDs is left
// (their operators clean up behind them), then it prunes the inventory, then
// it lets the Manifest go.
func (r *Reconciler) finalize(ctx context.Context, manifest *v1beta2.Manifest) (ctrl.Result, error) {
	base := manifest.DeepCopy()
	result, err := r.uninstall(ctx, manifest)
	if err != nil || !result.IsZero() {
		return result, errors.Join(err, statuspatch.IfChanged(ctx, r.Client, base, manifest, manifestStatus))
	}
	patch := client.MergeFrom(manifest.DeepCopy())
	controllerutil.RemoveFinalizer(manifest, v1beta2.ManifestFinalizer)
	if err := r.Patch(ctx, manifest, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) uninstall(ctx context.Context, manifest *v1beta2.Manifest) (ctrl.Result, error) {
	cluster, err := r.cluster(ctx, manifest)
	if errors.Is(err, remote.ErrNoKubeconfigSecret) {
		// The runtime is gone for good: its Secret was deleted. There is
		// nothing left to clean up in it, so do not block forever.
		ctrl.LoggerFrom(ctx).Info("Runtime has no kubeconfig Secret any more; releasing the Manifest without cleanup")
		return ctrl.Result{}, nil
	}
	if err != nil {
		setState(manifest, v1beta2.StateError, reasonRuntimeUnavailable, err.Error())
		return ctrl.Result{}, err
	}
	c := cluster.Client

	applier := cluster.Applier()
	owner := r.owner(manifest)
	if manifest.Annotations[v1beta2.UnmanageAnnotation] == "true" {
		if err := applier.ReleaseModule(ctx, manifest.Status.Synced, owner); err != nil {
			setState(manifest, v1beta2.StateError, reasonDeleteFailed, err.Error())
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	}

	setState(manifest, v1beta2.StateDeleting, reasonDeleting, "Removing the module from the runtime")
	cr, err := defaultCustomResource(manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil && !meta.IsNoMatchError(err) {
		return ctrl.Result{}, err
	}
	if cr != nil {
		deletion, err := apply.DeleteCustomResource(ctx, c, cr, owner)
		if err != nil {
			r.Runtimes.EvictOnError(kymaName(manifest), err)
			return ctrl.Result{}, err
		}
		if deletion == apply.CustomResourceLeft {
			ctrl.LoggerFrom(ctx).V(1).Info("Leaving the default custom resource: it is not the module's",
				"kind", cr.GetKind(), "namespace", cr.GetNamespace(), "name", cr.GetName())
		}
	}

	// Custom resources that the module's content itself ships are the
	// module's: they are deleted here, first, like the default one, so that
	// the module's operator (still running) can finalize them. Any other
	// custom resource of the module's CRDs is a user's, and blocks removal
	// until its owner deletes it.
	customResources, err := apply.CustomResourcesOf(ctx, c, manifest.Status.Synced)
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return ctrl.Result{}, err
	}
	if own, _ := apply.InInventory(customResources, manifest.Status.Synced); len(own) > 0 {
		removal, err := applier.RemoveModule(ctx, own, r.removeOptions(manifest))
		_, rest := apply.InInventory(manifest.Status.Synced, own)
		manifest.Status.Synced = append(rest, removal.Kept...) //nolint:gocritic // rest is ours to extend
		r.reportRemoval(ctx, manifest, removal)
		if err != nil {
			setState(manifest, v1beta2.StateError, reasonDeleteFailed, err.Error())
			return ctrl.Result{}, err
		}
		if customResources, err = apply.CustomResourcesOf(ctx, c, manifest.Status.Synced); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(customResources) > 0 {
		setState(manifest, v1beta2.StateDeleting, reasonWaitingForCustomResources,
			fmt.Sprintf("Waiting for %d custom resources to be deleted by their owners: %s", len(customResources), apply.Describe(customResources, 5)))
		return ctrl.Result{RequeueAfter: r.Intervals.After(v1beta2.StateDeleting)}, nil
	}

	removal, err := applier.RemoveModule(ctx, manifest.Status.Synced, r.removeOptions(manifest))
	manifest.Status.Synced = removal.Kept
	r.reportRemoval(ctx, manifest, removal)
	if err != nil {
		setState(manifest, v1beta2.StateError, reasonDeleteFailed, err.Error())
		return ctrl.Result{}, err
	}
	if len(removal.Waiting) > 0 {
		setState(manifest, v1beta2.StateDeleting, reasonWaitingForNamespace,
			fmt.Sprintf("Waiting for other modules being removed to leave namespace %s", strings.Join(removal.Waiting, ", ")))
		return ctrl.Result{RequeueAfter: r.Intervals.After(v1beta2.StateDeleting)}, nil
	}
	r.event(manifest, corev1.EventTypeNormal, "Uninstalled", "Removed the module's resources from the runtime")
	return ctrl.Result{}, nil
}

func (r *Reconciler) cluster(ctx context.Context, manifest *v1beta2.Manifest) (*remote.Cluster, error) {
	name := kymaName(manifest)
	if name == "" {
		return nil, fmt.Errorf("manifest has no %s label", v1beta2.KymaNameLabel)
	}
	return r.Runtimes.Get(ctx, name)
}

func manifestStatus(m *v1beta2.Manifest) any { return &m.Status }

func (r *Reconciler) event(manifest *v1beta2.Manifest, eventType, reason, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(manifest, nil, eventType, reason, reason, "%s", note)
	}
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
	return func(gvk schema.GroupVersionKind) (bool, error) {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return false, err
		}
		return mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
	}
}

func joinShort(items []string, total int) string {
	s := ""
	for i, item := range items {
		if i > 0 {
			s += ", "
		}
		s += item
	}
	if total > len(items) {
		s += fmt.Sprintf(" and %d more", total-len(items))
	}
	return s
}

// Package manifest carries out Manifests: it fetches and renders a module's
// content, applies it to the Kyma's runtime, keeps the inventory, prunes, and
// reports readiness (SPEC R3, R5).
package manifest

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/runtime"
	"github.com/runtime-fleet/lifecycle-manager/internal/statuspatch"
)

// UnmanageAnnotation is set to "true" by the Kyma controller before it
// deletes a Manifest to say: stop managing the module and leave its resources
// in the runtime (module managed: false).
const UnmanageAnnotation = "operator.kyma-project.io/unmanage"

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
	Runtimes      *runtime.Clients
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
		return ctrl.Result{RequeueAfter: runtime.RetryAfter()}, nil
	}
	defer release()
	rctx, cancel := runtime.WithReconcileDeadline(ctx, r.ReconcileTimeout)
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

	if err := runtime.EnsureNamespace(ctx, c, r.syncNamespace(manifest)); err != nil {
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

	applier := apply.NewApplier(c, cluster.Mapper)
	applied, err := applier.Apply(ctx, objects)
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		setState(manifest, v1beta2.StateError, reasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	if applied.Changed > 0 {
		log.Info("Applied module resources", "changed", applied.Changed, "total", len(objects))
		r.event(manifest, corev1.EventTypeNormal, "Applied", fmt.Sprintf("Applied %d of %d resources", applied.Changed, len(objects)))
	}

	notPruned, err := applier.Prune(ctx, manifest.Status.Synced, applied.Inventory)
	manifest.Status.Synced = append(applied.Inventory, notPruned...) //nolint:gocritic // Inventory is ours to extend
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
		created, err := apply.EnsureCustomResource(ctx, c, cr)
		if err != nil {
			setState(manifest, v1beta2.StateError, reasonApplyFailed, err.Error())
			return ctrl.Result{}, err
		}
		if created {
			r.event(manifest, corev1.EventTypeNormal, "CustomResourceCreated", fmt.Sprintf("Created %s %s", cr.GetKind(), cr.GetName()))
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
	if errors.Is(err, runtime.ErrNoKubeconfigSecret) {
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

	if manifest.Annotations[UnmanageAnnotation] == "true" {
		if err := releaseResources(ctx, c, manifest.Status.Synced); err != nil {
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
		if _, err := apply.DeleteCustomResource(ctx, c, cr); err != nil {
			r.Runtimes.EvictOnError(kymaName(manifest), err)
			return ctrl.Result{}, err
		}
	}
	remaining, total, err := apply.RemainingCustomResources(ctx, c, manifest.Status.Synced, 5)
	if err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return ctrl.Result{}, err
	}
	if total > 0 {
		setState(manifest, v1beta2.StateDeleting, reasonWaitingForCustomResources,
			fmt.Sprintf("Waiting for %d custom resources to be deleted by their owners: %s", total, joinShort(remaining, total)))
		return ctrl.Result{RequeueAfter: r.Intervals.After(v1beta2.StateDeleting)}, nil
	}

	failed, err := apply.NewApplier(c, cluster.Mapper).Delete(ctx, manifest.Status.Synced)
	if err != nil {
		manifest.Status.Synced = failed
		setState(manifest, v1beta2.StateError, reasonDeleteFailed, err.Error())
		return ctrl.Result{}, err
	}
	manifest.Status.Synced = nil
	r.event(manifest, corev1.EventTypeNormal, "Uninstalled", "Removed the module's resources from the runtime")
	return ctrl.Result{}, nil
}

func (r *Reconciler) cluster(ctx context.Context, manifest *v1beta2.Manifest) (*runtime.Cluster, error) {
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

// releaseResources removes this operator's labels from a module's resources
// so that nothing of ours claims them any more (module managed: false).
func releaseResources(ctx context.Context, c client.Client, inventory []v1beta2.Resource) error {
	for _, r := range inventory {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
		if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("reading %s %s/%s: %w", r.Kind, r.Namespace, r.Name, err)
		}
		patch := client.MergeFrom(obj.DeepCopy())
		labels := obj.GetLabels()
		delete(labels, v1beta2.ManagedByLabel)
		delete(labels, v1beta2.KymaNameLabel)
		delete(labels, v1beta2.ModuleNameLabel)
		obj.SetLabels(labels)
		if err := c.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing %s %s/%s: %w", r.Kind, r.Namespace, r.Name, err)
		}
	}
	return nil
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

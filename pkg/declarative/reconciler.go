package declarative

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Render turns a module resource into the objects to apply for it. An error
// is the resource's fault (a spec the manifests cannot take): it is reported
// as Error and not retried until the resource changes.
type Render func(obj *unstructured.Unstructured) ([]*unstructured.Unstructured, error)

// Reconciler reconciles the module resources of one kind: render, apply,
// prune what the last apply had and this one has not (status.inventory,
// guarded by OwnerLabel), report. Objects are applied under FieldManager with server-side apply,
// carry OwnerLabel, and, when they live in the resource's namespace, an
// owner reference to it (so that the garbage collector removes them should
// the finalizer be taken off by hand).
type Reconciler struct {
	Client client.Client
	// GVK is the kind of the module resource.
	GVK schema.GroupVersionKind
	// Render makes the objects of one resource.
	Render Render
	// FieldManager applies the rendered objects; status is patched under
	// FieldManager + "-status".
	FieldManager string
	// Finalizer holds a resource until its objects are gone.
	Finalizer string
	// RequeueProcessing is how soon a resource whose objects are not ready
	// yet is looked at again (2 s when zero).
	RequeueProcessing time.Duration
	// RequeueReady is how soon a Ready resource is looked at again, for
	// drift (10 min when zero).
	RequeueReady time.Duration
}

// OwnerLabel marks every object the library applies with the resource it
// belongs to (namespace.name, or name for a cluster-scoped resource).
const OwnerLabel = "declarative.runtime-fleet.io/owner"

// SetupWithManager watches the module resources of r.GVK.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.GVK)
	return ctrl.NewControllerManagedBy(mgr).For(obj).Named(r.FieldManager).Complete(r)
}

// Reconcile is the one skeleton: get, defer the status patch, deletion,
// finalizer, then reconcile.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.GVK)
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("resource", klog.KObj(obj))
	before := obj.DeepCopy()
	var status Status
	defer func() {
		if status.State == "" {
			return
		}
		if err := r.patchStatus(ctx, before, obj, status); err != nil && retErr == nil {
			retErr = err
		}
	}()

	if !obj.GetDeletionTimestamp().IsZero() {
		if !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
			return ctrl.Result{}, nil
		}
		status, result, retErr = r.delete(ctx, obj)
		if status.State == "" { // done: the finalizer is off
			log.Info("Removed the objects of the resource")
		}
		return result, retErr
	}
	if !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
		patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(obj, r.Finalizer)
		if err := r.Client.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
		before = obj.DeepCopy()
	}
	status, result, retErr = r.reconcile(ctx, obj)
	return result, retErr
}

func (r *Reconciler) reconcile(ctx context.Context, obj *unstructured.Unstructured) (Status, ctrl.Result, error) {
	objects, err := r.render(obj)
	if err != nil {
		return Status{State: StateError, Reason: ReasonRenderFailed, Message: "The manifests do not render with this spec: " + err.Error()},
			ctrl.Result{}, reconcile.TerminalError(err)
	}
	for _, o := range objects {
		//nolint:staticcheck // client.Apply on unstructured fills o with the live object, which readiness needs
		if err := r.Client.Patch(ctx, o, client.Apply, client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
			return Status{State: StateError, Reason: ReasonApplyFailed, Message: fmt.Sprintf("Applying %s %s failed", o.GetKind(), o.GetName())},
				ctrl.Result{}, fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	current := refsOf(objects)
	var kept []Ref
	var pruneErr error
	for _, ref := range stale(inventoryOf(obj), current) {
		gone, err := deleteOwned(ctx, r.Client, ref, ownerOf(obj))
		if err != nil && pruneErr == nil {
			pruneErr = err
		}
		if err != nil || !gone {
			kept = append(kept, ref) // looked at again on the next reconcile
		}
	}
	inventory := union(current, kept)
	if pruneErr != nil {
		return Status{State: StateError, Reason: ReasonPruneFailed, Message: "Removing objects the manifests no longer have failed", Inventory: inventory},
			ctrl.Result{}, pruneErr
	}
	s := statusOf(objects)
	s.Inventory = inventory
	if len(kept) > 0 && s.State == StateReady {
		s = Status{State: StateProcessing, Reason: ReasonProgressing, Message: fmt.Sprintf("Waiting for %d removed objects to go", len(kept)), Inventory: inventory}
	}
	switch s.State {
	case StateReady:
		return s, ctrl.Result{RequeueAfter: orDefault(r.RequeueReady, 10*time.Minute)}, nil
	case StateError:
		return s, ctrl.Result{RequeueAfter: orDefault(r.RequeueProcessing, 2*time.Second) * 5}, nil
	default:
		return s, ctrl.Result{RequeueAfter: orDefault(r.RequeueProcessing, 2*time.Second)}, nil
	}
}

// delete removes the resource's objects (its inventory, and what its spec
// renders to) that still carry its owner label, then the finalizer.
func (r *Reconciler) delete(ctx context.Context, obj *unstructured.Unstructured) (Status, ctrl.Result, error) {
	refs := inventoryOf(obj)
	if objects, err := r.render(obj); err == nil {
		refs = union(refs, refsOf(objects))
	}
	remaining := []Ref{}
	for _, ref := range refs {
		gone, err := deleteOwned(ctx, r.Client, ref, ownerOf(obj))
		if err != nil {
			return Status{State: StateError, Reason: ReasonDeleteFailed, Message: "Deleting " + ref.String() + " failed", Inventory: union(remaining, refs)},
				ctrl.Result{}, err
		}
		if !gone {
			remaining = append(remaining, ref)
		}
	}
	if len(remaining) > 0 {
		return Status{State: StateDeleting, Reason: ReasonDeleting, Message: fmt.Sprintf("Deleting %d objects", len(remaining)), Inventory: remaining},
			ctrl.Result{RequeueAfter: orDefault(r.RequeueProcessing, 2*time.Second)}, nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(obj, r.Finalizer)
	if err := r.Client.Patch(ctx, obj, patch); err != nil {
		return Status{}, ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return Status{}, ctrl.Result{}, nil
}

// ownerOf is the OwnerLabel value of obj's objects.
func ownerOf(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "." + obj.GetName()
}

// render calls Render and puts the owner's marks on what it returns.
func (r *Reconciler) render(obj *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	objects, err := r.Render(obj)
	if err != nil {
		return nil, err
	}
	owner := ownerOf(obj)
	for _, o := range objects {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[OwnerLabel] = owner
		o.SetLabels(labels)
		if o.GetNamespace() == "" && obj.GetNamespace() != "" && isNamespacedGuess(o) {
			o.SetNamespace(obj.GetNamespace())
		}
		if obj.GetNamespace() != "" && o.GetNamespace() == obj.GetNamespace() {
			o.SetOwnerReferences([]metav1.OwnerReference{{
				APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(),
			}})
		}
	}
	return objects, nil
}

// isNamespacedGuess says whether an object without a namespace should get
// its resource's: everything but the cluster-scoped kinds a module operator
// commonly ships. Render should set namespaces itself when it knows better.
func isNamespacedGuess(o *unstructured.Unstructured) bool {
	switch o.GetKind() {
	case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
		"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "StorageClass":
		return false
	}
	return true
}

// patchStatus merge-patches the status when it changed, under its own
// field manager; a resource gone meanwhile is not an error.
func (r *Reconciler) patchStatus(ctx context.Context, before, obj *unstructured.Unstructured, s Status) error {
	if err := setStatus(obj, s, metav1.Now()); err != nil {
		return err
	}
	oldStatus, _, _ := unstructured.NestedMap(before.Object, "status")
	newStatus, _, _ := unstructured.NestedMap(obj.Object, "status")
	if equality.Semantic.DeepEqual(oldStatus, newStatus) {
		return nil
	}
	err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(before), client.FieldOwner(r.FieldManager+"-status"))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

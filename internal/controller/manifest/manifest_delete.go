package manifest

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// uninstall removes the module from the runtime, in a safe order:
//  1. the default custom resource (the module's operator, still running,
//     finalizes it);
//  2. the custom resources the module's content ships (instances of its
//     own CRDs; they are in the inventory, so they are the module's);
//  3. it waits until no custom resource of the module's CRDs is left: the
//     module's own ones while their operator finalizes them, other people's
//     until their owners delete them (deleting the CRD would delete them);
//  4. the rest of the inventory, Namespaces after it and CRDs last
//     (apply.RemoveModule's order).
//
// Only custom resources that are not the module's block the removal, and
// the status names them.
func (r *Reconciler) uninstall(ctx context.Context, manifest *v1beta2.Manifest) (o reconciler.Outcome) {
	r.verified.Forget(manifest.UID)
	r.awaits.Done(client.ObjectKeyFromObject(manifest))
	defer func() {
		if o.Kind == reconciler.KindDone {
			r.goneSince.Delete(manifest.UID)
		}
	}()
	cluster, o := r.cluster(ctx, manifest)
	if cluster == nil {
		if errors.Is(o.Err, remote.ErrNoKubeconfigSecret) {
			// The runtime is gone for good: its Secret was deleted. There
			// is nothing left to clean up in it, so do not block forever.
			ctrl.LoggerFrom(ctx).Info("Runtime has no kubeconfig Secret any more; releasing the Manifest without cleanup")
			if err := r.removeIdentity(ctx, nil, manifest); err != nil {
				return r.deleteFailed(manifest, err)
			}
			return reconciler.Done()
		}
		return o
	}
	// The module's objects are removed as the module's identity, which
	// holds the writes of everything in the inventory; the identity goes
	// last.
	writer, err := r.writer(cluster, manifest)
	if err != nil {
		return r.deleteFailed(manifest, err)
	}
	o = r.removeModule(ctx, cluster, writer, manifest)
	if !apierrors.IsForbidden(o.Err) || manifest.Spec.RBAC == nil {
		return o
	}
	// Refused to the identity: someone may have deleted its bindings in
	// the runtime. Write what the removal needs and try once more; a
	// removal that finds everything gone already never gets here, so it
	// never brings an identity back.
	if writer, err = r.removalWriter(ctx, cluster, manifest); err != nil {
		return r.deleteFailed(manifest, err)
	}
	o = r.removeModule(ctx, cluster, writer, manifest)
	if refused, ok := r.removalRefused(cluster, manifest, o.Err); ok {
		return refused
	}
	return o
}

// removeModule removes the module's objects, writing through writer, and
// its identity once nothing is left.
func (r *Reconciler) removeModule(ctx context.Context, cluster *remote.Cluster, writer client.Client, manifest *v1beta2.Manifest) reconciler.Outcome {
	applier := apply.NewApplier(writer, cluster.Mapper)
	if manifest.Annotations[v1beta2.UnmanageAnnotation] == "true" {
		if err := applier.ReleaseModule(ctx, manifest.Status.Synced, r.owner(manifest)); err != nil {
			return r.deleteFailed(manifest, err)
		}
		return r.uninstalled(ctx, cluster, manifest)
	}
	if err := r.deleteDefaultCustomResources(ctx, cluster, writer, manifest); err != nil {
		return r.deleteFailed(manifest, err)
	}
	crs, err := r.removeOwnCustomResources(ctx, writer, applier, manifest)
	if err != nil {
		return r.deleteFailed(manifest, err)
	}
	if len(crs.Others) > 0 {
		return blockedByCustomResources(crs.Others, r.blockedRequeue(manifest))
	}
	if len(crs.Own) > 0 {
		return r.finalizingOwnCustomResources(ctx, cluster, manifest, crs.Own)
	}

	removal, err := applier.RemoveModule(ctx, manifest.Status.Synced, r.removeOptions(manifest))
	manifest.Status.Synced = removal.Kept
	r.reportRemoval(ctx, manifest, removal)
	if err != nil {
		return r.deleteFailed(manifest, err)
	}
	if len(removal.Waiting) > 0 {
		return waitingForNamespaces(removal.Waiting, r.Intervals.After(v1beta2.StateDeleting))
	}
	r.events.Normal(manifest, "Uninstalled", "Removed the module's resources from the runtime")
	return r.uninstalled(ctx, cluster, manifest)
}

// uninstalled removes the module's identity once nothing of the module is
// left to write.
func (r *Reconciler) uninstalled(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) reconciler.Outcome {
	_, declared := r.identity(manifest)
	if declared || (manifest.Status.Access != nil && manifest.Status.Access.Identity != v1beta2.IdentityAdmin) {
		if err := r.removeIdentity(ctx, cluster, manifest); err != nil {
			return r.deleteFailed(manifest, err)
		}
	}
	return reconciler.Done()
}

// deleteDefaultCustomResource starts deleting the module's default custom
// resource, if it is the module's; one the runtime owner made is left.
func (r *Reconciler) deleteDefaultCustomResource(ctx context.Context, cluster *remote.Cluster, writer client.Client, manifest *v1beta2.Manifest) error {
	cr, err := defaultCustomResource(manifest, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil // its CRD is gone, and with it the resource
		}
		return err
	}
	if cr == nil {
		return nil
	}
	deletion, err := apply.DeleteCustomResource(ctx, writer, cr, r.owner(manifest))
	if err != nil {
		return err
	}
	if deletion == apply.CustomResourceLeft {
		ctrl.LoggerFrom(ctx).V(1).Info("Leaving the default custom resource: it is not the module's",
			"kind", cr.GetKind(), "namespace", cr.GetNamespace(), "name", cr.GetName())
	}
	return nil
}

// removeOwnCustomResources deletes the custom resources of the module's
// CRDs that the module's content ships, drops them from the inventory, and
// returns the custom resources that are still there afterwards.
func (r *Reconciler) removeOwnCustomResources(ctx context.Context, c client.Client, applier *apply.Applier, manifest *v1beta2.Manifest) (apply.CustomResources, error) {
	owner := r.owner(manifest)
	crs, err := apply.CustomResourcesOf(ctx, c, manifest.Status.Synced, owner)
	if err != nil {
		return crs, err
	}
	shipped, _ := apply.InInventory(crs.Own, manifest.Status.Synced)
	if len(shipped) == 0 {
		return crs, nil
	}
	removal, err := applier.RemoveModule(ctx, shipped, r.removeOptions(manifest))
	_, rest := apply.InInventory(manifest.Status.Synced, shipped)
	manifest.Status.Synced = append(rest, removal.Kept...) //nolint:gocritic // rest is ours to extend
	r.reportRemoval(ctx, manifest, removal)
	if err != nil {
		return crs, err
	}
	return apply.CustomResourcesOf(ctx, c, manifest.Status.Synced, owner)
}

func (r *Reconciler) deleteFailed(manifest *v1beta2.Manifest, err error) reconciler.Outcome {
	r.Runtimes.EvictOnError(kymaName(manifest), err)
	return reconciler.Retry(ReasonDeleteFailed, failedMessage("Removing the module from the runtime", err), err)
}

// maxBlockedRequeue caps how long a deletion blocked by other people's
// custom resources waits between looks.
const maxBlockedRequeue = 5 * time.Minute

// blockedRequeue is when a Manifest whose removal waits for other people's
// custom resources is looked at again: as long as it has been waiting
// already (so the interval doubles), from the Deleting interval up to
// maxBlockedRequeue, jittered. A blocked removal can last days; polling it
// every two seconds for that long would only load the runtime. The runtime
// watcher, when on, still requeues it at once when a resource goes.
func (r *Reconciler) blockedRequeue(manifest *v1beta2.Manifest) time.Duration {
	base := r.Intervals.Processing // the Deleting interval (requeue.Intervals.After)
	return requeue.Jitter(blockedInterval(time.Since(manifest.DeletionTimestamp.Time), base, maxBlockedRequeue), r.Intervals.Jitter)
}

// blockedInterval is the pure rule of blockedRequeue: the time waited so
// far, within [base, ceiling].
func blockedInterval(waited, base, ceiling time.Duration) time.Duration {
	return min(max(waited, base), max(ceiling, base))
}

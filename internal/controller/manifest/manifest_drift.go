package manifest

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/drift"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// The periodic drift check. A full reconcile renders the content and
// dry-runs every object; for a module that nobody touched that is all
// waste, and at the Ready interval across a fleet it was most of an idle
// operator's CPU. So a full reconcile that found nothing to change
// remembers a drift.Fingerprint, and the next reconcile of the same
// Manifest (same generation, labels, annotations, inventory, runtime)
// first reads its objects' versions cheaply (apply.ReadVersions): when every
// one is as verified, nothing was written to any of them since, so the
// render, apply and prune are skipped and only the default custom resource
// and readiness are looked at. Anything else — a changed, deleted or
// recreated object, removed labels, a new generation, an operator restart,
// another runtime behind the Kyma — is a full reconcile.

// unchanged reports whether the Manifest's objects are as the last full
// reconcile verified them. A failed read is not an answer: the full
// reconcile runs and reports what is wrong.
func (r *Reconciler) unchanged(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) bool {
	verified, ok := r.verified.Recall(manifest.UID)
	if !ok || !verified.Describes(manifest, cluster.Identity()) {
		return false
	}
	live, err := apply.ReadVersions(ctx, cluster.Client, manifest.Status.Synced, r.owner(manifest))
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Reading the module's object versions failed; checking in full", "error", err.Error())
		return false
	}
	if !verified.Unchanged(live) {
		ctrl.LoggerFrom(ctx).V(1).Info("Module objects changed in the runtime; checking in full")
		r.verified.Forget(manifest.UID)
		return false
	}
	return true
}

// versionsBefore reads the versions of the objects about to be applied, so
// that verify can tell whether anything wrote to them meanwhile. Nil when
// the read fails: nothing is then remembered.
func (r *Reconciler) versionsBefore(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, inventory []v1beta2.Resource) apply.Versions {
	r.verified.Forget(manifest.UID)
	if len(manifest.Status.Synced) == 0 {
		// A first install writes everything: nothing to remember yet.
		return nil
	}
	versions, err := apply.ReadVersions(ctx, cluster.Client, inventory, r.owner(manifest))
	if err != nil {
		return nil
	}
	return versions
}

// verify remembers the Manifest's fingerprint after a full apply and prune
// when the objects' versions read after them equal those read before: then
// neither the apply nor anyone else wrote to any of them in between, so the
// dry-run diff saw exactly the objects at these versions and found them as
// the content wants them. A module that had to be changed is remembered by
// the next full reconcile, which finds nothing to change.
func (r *Reconciler) verify(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, before apply.Versions) {
	if before == nil {
		return
	}
	after, err := apply.ReadVersions(ctx, cluster.Client, manifest.Status.Synced, r.owner(manifest))
	if err != nil || !before.Covers(manifest.Status.Synced, after) {
		return
	}
	r.verified.Remember(manifest.UID, drift.Of(manifest, cluster.Identity(), after))
}

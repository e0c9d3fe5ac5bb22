package manifest

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/drift"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// The periodic drift check. A full reconcile renders the content and
// dry-runs every object; for a module that nobody touched that is all
// waste, and at the Ready interval across a fleet it was most of an idle
// operator's CPU. So a full reconcile that found nothing to change
// remembers a drift.Fingerprint, and the next reconcile of the same
// Manifest (same generation, labels, annotations, inventory, runtime)
// first reads its objects' versions cheaply (apply.ReadVersions, from one
// List per kind and namespace shared by the Kyma's Manifests, whose checks
// fall on the same moments: drift.Listings, requeue.Aligned): when every
// one is as verified, nothing was written to any of them since, so the
// render, apply and prune are skipped and only the default custom resource
// and readiness are looked at. Anything else — a changed, deleted or
// recreated object, removed labels, a new generation, an operator restart,
// another runtime behind the Kyma — is a full reconcile.

// listingTTL is how long a List of a Kyma's objects answers the checks of
// its other Manifests (drift.Listings): they are due at the same moment,
// and a runtime's worker slots let them through within seconds.
const listingTTL = 30 * time.Second

// listingTTLFor is listingTTL, or half the Ready interval when that is
// shorter: a listing that outlived the interval would answer a Manifest's
// next check with what its previous check saw, so that drift made in
// between went unseen for up to listingTTL (with the seconds-long Ready
// intervals of tests and lmctl dev, for several checks).
func listingTTLFor(intervals requeue.Intervals) time.Duration {
	if intervals.Ready > 0 {
		return min(listingTTL, intervals.Ready/2)
	}
	return listingTTL
}

// unchanged reports whether the Manifest's objects are as the last full
// reconcile verified them. A failed read is not an answer: the full
// reconcile runs and reports what is wrong.
func (r *Reconciler) unchanged(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) bool {
	verified, ok := r.verified.Recall(manifest.UID)
	if !ok || !verified.Describes(manifest, cluster.Identity()) || r.tokenDue(manifest, time.Now()) {
		return false
	}
	kyma := kymaName(manifest)
	list := r.listings.Lister(apply.KymaLister(cluster.Client, kyma), cluster.Identity(), kyma, verified.At)
	live, err := apply.ReadVersions(ctx, list, manifest.Status.Synced, r.owner(manifest))
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Reading the module's object versions failed; checking in full", "error", err.Error())
		return false
	}
	if !verified.Unchanged(manifest.Status.Synced, live) {
		ctrl.LoggerFrom(ctx).V(1).Info("Module objects changed in the runtime; checking in full")
		r.verified.Forget(manifest.UID)
		return false
	}
	return true
}

// verify remembers the Manifest's fingerprint after a full apply and prune,
// from the versions at which the apply verified each object (apply.Observed:
// written by it, or dry-run against the version it read). It reads nothing
// back: should anyone have written to an object since (a workload's status
// still settling), its version differs at the next check, which then runs
// in full, as it would without a fingerprint.
func (r *Reconciler) verify(cluster *remote.Cluster, manifest *v1beta2.Manifest, verified apply.Versions) {
	if f, ok := drift.Of(manifest, cluster.Identity(), verified); ok {
		r.verified.Remember(manifest.UID, f)
	}
}

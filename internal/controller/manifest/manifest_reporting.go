package manifest

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// ModuleObjects describe a module's objects as the runtime watcher would
// see them: the resources they are served as, the namespaces of the
// namespaced ones, and the labels every one of them carries.
type ModuleObjects struct {
	Resources  []schema.GroupVersionResource
	Namespaces []string
	Labels     map[string]string
}

// Reporting tells whether the runtime watcher reports a change to any of a
// module's objects at once: the Kyma's runtime has a healthy agent, and a
// valid Watcher selects every resource of the module's objects by labels
// they carry. A report requeues the Manifest (internal/watcher/listener), so
// its periodic check can run much less often.
type Reporting interface {
	Reports(ctx context.Context, kymaName string, objects ModuleObjects) bool
}

// next sets when a Ready Manifest is checked again (readyAfter). One whose
// objects' versions are remembered waits in checks, which looks at its
// Kyma's Manifests together without a reconcile (manifest_checks.go);
// without checks (a Reconciler not set up with a manager) or a fingerprint,
// it is requeued, within checkSpread of its Kyma's other Manifests.
func (r *Reconciler) next(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, o reconciler.Outcome) reconciler.Outcome {
	if o.Kind != reconciler.KindProgressing {
		r.awaits.Done(client.ObjectKeyFromObject(manifest))
	}
	if o.Kind != reconciler.KindReady || r.Intervals.Ready <= 0 {
		return o
	}
	after := r.readyAfter(ctx, cluster, manifest)
	if untilDue, ok := r.untilTokenDue(manifest, time.Now()); ok && untilDue < after {
		after = untilDue
	}
	if r.checks != nil {
		if _, ok := r.verified.Recall(manifest.UID); ok {
			r.checks.schedule(manifest, after)
			o.After = 0
			return o
		}
		r.checks.unschedule(manifest)
	}
	o.After = after + requeue.Spread(manifest.Name, checkSpread)
	return o
}

// readyAfter is how long until a Ready Manifest is checked again: the Ready
// interval, or ReportedReadyFactor Ready intervals while the watcher reports
// every change to the module's objects (the periodic check stays, rarer, for
// what the agent does not report, label-only changes, or loses). The checks
// of a Kyma's Manifests fall on the same moments (requeue.Aligned), so that
// they share their reads (manifest_drift.go).
func (r *Reconciler) readyAfter(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) time.Duration {
	interval := r.Intervals.Ready
	if r.Reporting != nil && r.ReportedReadyFactor > 1 {
		objects, ok := moduleObjects(cluster, manifest, r.owner(manifest).Module)
		if ok && r.Reporting.Reports(ctx, kymaName(manifest), objects) {
			interval *= time.Duration(r.ReportedReadyFactor)
		}
	}
	return requeue.Aligned(interval, kymaName(manifest), time.Now())
}

// checkSpread is how far apart, at most, the checks of one Kyma's Manifests
// are: close enough to share a listing (listingTTL), far enough apart that
// a few at a time take the runtime's worker slots.
const checkSpread = 5 * time.Second

// moduleObjects describes the Manifest's inventory for the watcher; false
// when a kind cannot be mapped to its resource.
func moduleObjects(cluster *remote.Cluster, manifest *v1beta2.Manifest, module string) (ModuleObjects, bool) {
	objects := ModuleObjects{Labels: map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: kymaName(manifest), v1beta2.ModuleNameLabel: module,
	}}
	resources := map[schema.GroupVersionResource]bool{}
	namespaces := map[string]bool{}
	for _, res := range manifest.Status.Synced {
		mapping, err := cluster.Mapper.RESTMapping(schema.GroupKind{Group: res.Group, Kind: res.Kind}, res.Version)
		if err != nil {
			return ModuleObjects{}, false
		}
		if !resources[mapping.Resource] {
			resources[mapping.Resource] = true
			objects.Resources = append(objects.Resources, mapping.Resource)
		}
		if res.Namespace != "" && !namespaces[res.Namespace] {
			namespaces[res.Namespace] = true
			objects.Namespaces = append(objects.Namespaces, res.Namespace)
		}
	}
	return objects, true
}

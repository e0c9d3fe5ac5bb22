package manifest

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// Taking over what the Kyma lifecycle-manager (KLM) installed
// (docs/migrating-from-klm.md). KLM's Manifest of a module and this
// operator's live side by side for a moment: this operator's Manifest,
// before it applies anything, takes over the objects that KLM's Manifest
// recorded in status.synced and marked as applied for it (its labels and
// owned-by annotation, never the content alone), and its default custom
// resource: their fields move from KLM's managers to this operator's, one
// metadata write each, and they become this Manifest's inventory. Its first
// apply then writes this operator's labels and removes what KLM set and it
// does not (KLM's marks, anything the version dropped). Only after that is
// recorded (status.takenOver) is KLM's Manifest released: its finalizers
// removed and the Manifest deleted, with nothing in the runtime touched.

// Reasons of the takeover.
const (
	// ReasonKLMInstalled: KLM installed the module, and this operator does
	// not take the Kyma over (--klm-takeover); nothing is written.
	ReasonKLMInstalled = "KLMInstalled"
	// ReasonTakeoverFailed: moving KLM's objects failed; retried.
	ReasonTakeoverFailed = "TakeoverFailed"
)

// klmModuleManagers are KLM's managers of a module's objects. The plain
// "manager" is left out: a module's own operator may carry that name.
var klmModuleManagers = sets.New(takeover.ApplierManager, takeover.DefaultCRManager)

// takeOver moves the module's objects from KLM's Manifest to this one,
// once, before this Manifest's first apply; ok is false when the reconcile
// must end with o.
func (r *Reconciler) takeOver(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest) (reconciler.Outcome, bool) {
	if manifest.Status.TakenOver != nil || len(manifest.Status.Synced) > 0 || takeover.IsKLMManifest(manifest) {
		return reconciler.Outcome{}, true
	}
	predecessor, err := r.predecessor(ctx, manifest)
	if err != nil {
		return reconciler.Retry(ReasonTakeoverFailed, failedMessage("Looking for the Kyma lifecycle-manager's Manifest of the module", err), err), false
	}
	if predecessor == nil {
		return reconciler.Outcome{}, true
	}
	if !r.Takeover.Covers(r.kymaOf(ctx, manifest)) {
		o := reconciler.Stalled(ReasonKLMInstalled, fmt.Sprintf(
			"The Kyma lifecycle-manager installed this module (its Manifest %s); this operator writes nothing of it until it takes the Kyma over: "+
				"start the operator with --klm-takeover=all, or with --klm-takeover=labelled and label the Kyma %s=true (docs/migrating-from-klm.md)",
			predecessor.Name, takeover.Label), nil)
		o.After = r.Intervals.After(v1beta2.StateError)
		return o, false
	}
	owner := r.owner(manifest)
	from := predecessor.Namespace + "/" + predecessor.Name
	now := r.now()
	inventory := make([]v1beta2.Resource, 0, len(predecessor.Status.Synced))
	for _, res := range predecessor.Status.Synced {
		move := takeover.Move{From: klmModuleManagers, To: apply.FieldManager,
			Claim: func(live *metav1.ObjectMeta) bool { return takeover.AppliedBy(live, from) }}
		moved, err := move.Apply(ctx, cluster.Client, schema.GroupVersionKind(res.GroupVersionKind), client.ObjectKey{Namespace: res.Namespace, Name: res.Name}, now)
		if err != nil {
			r.Runtimes.EvictOnError(kymaName(manifest), err)
			return reconciler.Retry(ReasonTakeoverFailed, failedMessage("Taking over the objects the Kyma lifecycle-manager installed", err), err), false
		}
		if moved == takeover.MovedNow || moved == takeover.MovedAlready {
			inventory = append(inventory, res)
		}
	}
	if err := r.takeOverDefaultCustomResource(ctx, cluster, manifest, predecessor, owner, now); err != nil {
		r.Runtimes.EvictOnError(kymaName(manifest), err)
		return reconciler.Retry(ReasonTakeoverFailed, failedMessage("Taking over the default custom resource the Kyma lifecycle-manager created", err), err), false
	}
	manifest.Status.Synced = inventory
	manifest.Status.TakenOver = &v1beta2.TakenOver{Manifest: predecessor.Name, Objects: len(inventory), Time: metav1.NewTime(now)}
	r.events.Normal(manifest, "TakenOver", fmt.Sprintf(
		"Took over %d objects that the Kyma lifecycle-manager installed (its Manifest %s) in place; nothing was recreated", len(inventory), predecessor.Name))
	ctrl.LoggerFrom(ctx).Info("Took over the module from the Kyma lifecycle-manager", "klmManifest", predecessor.Name, "objects", len(inventory))
	return reconciler.Outcome{}, true
}

// takeOverDefaultCustomResource gives this operator the default custom
// resource KLM created (with Update, under its own manager: the proof that
// KLM made it, as it puts no label on it) under the name this Manifest
// names too: this operator's labels make it the module's, to be deleted
// with the module, and its fields move. One the runtime owner made stays
// the owner's.
func (r *Reconciler) takeOverDefaultCustomResource(ctx context.Context, cluster *remote.Cluster, manifest, predecessor *v1beta2.Manifest, owner apply.Owner, now time.Time) error {
	if predecessor.Spec.CustomResourcePolicy == v1beta2.CustomResourcePolicyIgnore {
		return nil
	}
	// Named as it will be once the takeover is recorded: a template's
	// default CR without a name is named after KLM's Manifest.
	named := *manifest
	named.Status.TakenOver = &v1beta2.TakenOver{Manifest: predecessor.Name}
	cr, err := defaultCustomResource(&named, r.syncNamespace(manifest), namespacedFunc(cluster.Mapper))
	if err != nil || cr == nil {
		return err
	}
	move := takeover.Move{From: klmModuleManagers, To: apply.FieldManager, Labels: cr.GetLabels(),
		Claim: func(live *metav1.ObjectMeta) bool {
			return !owner.Owns(live.Labels) && slices.ContainsFunc(live.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
				return e.Manager == takeover.DefaultCRManager
			})
		}}
	_, err = move.Apply(ctx, cluster.Client, cr.GroupVersionKind(), client.ObjectKeyFromObject(cr), now)
	return err
}

// predecessor is KLM's Manifest of the same module of the same Kyma, if
// one is left.
func (r *Reconciler) predecessor(ctx context.Context, manifest *v1beta2.Manifest) (*v1beta2.Manifest, error) {
	list, err := r.manifestsOfModule(ctx, manifest.Namespace, kymaName(manifest), manifest.Spec.ModuleName)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if m := &list[i]; m.Name != manifest.Name && takeover.IsKLMManifest(m) {
			return m, nil
		}
	}
	return nil, nil
}

// successor is this operator's Manifest that took over KLM's.
func (r *Reconciler) successor(ctx context.Context, klm *v1beta2.Manifest) (*v1beta2.Manifest, error) {
	list, err := r.manifestsOfModule(ctx, klm.Namespace, kymaName(klm), klm.Labels[v1beta2.ModuleNameLabel])
	if err != nil {
		return nil, err
	}
	for i := range list {
		if m := &list[i]; m.Status.TakenOver != nil && m.Status.TakenOver.Manifest == klm.Name {
			return m, nil
		}
	}
	return nil, nil
}

// manifestsOfModule are the Manifests of one module of one Kyma, read
// through the cache's index of Manifests by Kyma: a few per Kyma, where a
// label selector would scan every Manifest of the namespace.
func (r *Reconciler) manifestsOfModule(ctx context.Context, namespace, kyma, module string) ([]v1beta2.Manifest, error) {
	list := &v1beta2.ManifestList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), index.OfKyma(kyma)); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(m v1beta2.Manifest) bool { return m.Labels[v1beta2.ModuleNameLabel] != module }), nil
}

func (r *Reconciler) kymaOf(ctx context.Context, manifest *v1beta2.Manifest) *v1beta2.Kyma {
	kyma := &v1beta2.Kyma{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: manifest.Namespace, Name: kymaName(manifest)}, kyma, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	return kyma
}

// releasePredecessor handles a Manifest of KLM's, which this operator
// never installs from: once this operator's Manifest of the module has
// recorded that it took the objects over, KLM's Manifest has no duty left,
// and its finalizers go and it is deleted; until then it is left exactly as
// it is (also while the Kyma is not taken over), and looked at again.
//
// It is looked at again when a Manifest records taking it over
// (takenOverPredecessor), and when its Kyma's labels change (a pause ends,
// the takeover label is set): no polling while it waits.
func (r *Reconciler) releasePredecessor(ctx context.Context, klm *v1beta2.Manifest, kyma *v1beta2.Kyma) (ctrl.Result, error) {
	if !r.Takeover.Covers(kyma) || r.Pause.Paused(kyma) {
		return ctrl.Result{}, nil
	}
	successor, err := r.successor(ctx, klm)
	if err != nil || successor == nil {
		return ctrl.Result{}, err
	}
	// Deleted before its finalizers go: were the patch to fail, the next
	// look still finds KLM's finalizers, and never takes it for a
	// Manifest of this operator's to install from.
	if klm.DeletionTimestamp.IsZero() {
		if err := r.Delete(ctx, klm); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	patch := client.MergeFromWithOptions(klm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	klm.Finalizers = slices.DeleteFunc(klm.Finalizers, func(f string) bool { return slices.Contains(takeover.ManifestFinalizers, f) })
	if err := r.Patch(ctx, klm, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Released the Kyma lifecycle-manager's Manifest", "takenOverBy", successor.Name)
	return ctrl.Result{}, nil
}

// takeoverRecorded passes the update in which a Manifest first records
// that it took over a KLM Manifest.
var takeoverRecorded = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, okBefore := e.ObjectOld.(*v1beta2.Manifest)
		after, okAfter := e.ObjectNew.(*v1beta2.Manifest)
		return okBefore && okAfter && before.Status.TakenOver == nil && after.Status.TakenOver != nil
	},
}

// takenOverPredecessor is the KLM Manifest that a Manifest took over.
func takenOverPredecessor(_ context.Context, obj client.Object) []reconcile.Request {
	m, ok := obj.(*v1beta2.Manifest)
	if !ok || m.Status.TakenOver == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Status.TakenOver.Manifest}}}
}

package manifest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Custom resources whose operator is gone (SPEC G11). A module's removal
// waits while its operator finalizes the module's own custom resources
// (manifest_delete.go). When that operator is gone — the module's manager
// does not exist, or has no available replica, because it was removed
// first, crashed, or never started — nobody will remove their finalizers.
// That is a known state, OperatorGone, whose message names each waiting
// resource, its finalizers and the manager. What happens next is the SRE's
// choice (OrphanedFinalizers): keep waiting, the default; or, once a
// resource has waited After, remove the module's own finalizers from the
// module's own custom resources, and only those. Every removal is a
// Warning event and a note in the removal's operation history.

// OrphanPolicy is what happens to the module's own custom resources that
// wait for finalizers while the module's manager is gone.
type OrphanPolicy string

const (
	// OrphansWait keeps waiting: a person restores the manager or removes
	// the finalizers.
	OrphansWait OrphanPolicy = "wait"
	// OrphansRemove removes the module's own finalizers once a resource
	// has waited OrphanedFinalizers.After.
	OrphansRemove OrphanPolicy = "remove"
)

// DefaultOrphanedFinalizersAfter is how long a resource waits before the
// remove policy acts, unless the SRE sets another time.
const DefaultOrphanedFinalizersAfter = 30 * time.Minute

// OrphanedFinalizers configures the bounded wait (--orphaned-finalizers,
// --orphaned-finalizers-after).
type OrphanedFinalizers struct {
	// Policy is wait (the default when empty) or remove.
	Policy OrphanPolicy
	// After is how long a resource waits, counted from the later of its
	// deletion and the moment this process first saw the manager gone;
	// DefaultOrphanedFinalizersAfter when zero.
	After time.Duration
}

// Validate refuses a policy the operator does not know.
func (o OrphanedFinalizers) Validate() error {
	switch o.Policy {
	case "", OrphansWait, OrphansRemove:
	default:
		return fmt.Errorf("--orphaned-finalizers=%q: use %q or %q", o.Policy, OrphansWait, OrphansRemove)
	}
	if o.After < 0 {
		return fmt.Errorf("--orphaned-finalizers-after=%s: give a positive duration", o.After)
	}
	return nil
}

func (o OrphanedFinalizers) after() time.Duration {
	if o.After <= 0 {
		return DefaultOrphanedFinalizersAfter
	}
	return o.After
}

const (
	// ReasonOperatorGone says the module's own custom resources wait,
	// being deleted, for finalizers while the module's manager is gone.
	ReasonOperatorGone = "OperatorGone"
	// ReasonFinalizersRemoved is the event of a removal of the module's
	// own finalizers under the remove policy.
	ReasonFinalizersRemoved = "FinalizersRemoved"
)

// maxInspected bounds the custom resources one reconcile reads one by one
// while the manager is gone; the rest are read on the next reconciles.
const maxInspected = 100

// heldResource is one of the module's custom resources that is being
// deleted and still has finalizers.
type heldResource struct {
	resource v1beta2.Resource
	meta     metav1.ObjectMeta
	// own are the finalizers that are the module's (moduleFinalizer);
	// foreign the others.
	own, foreign []string
}

func (h heldResource) subject() string { return apply.Describe([]v1beta2.Resource{h.resource}, 1) }

// finalizingOwnCustomResources is the wait for the module's own custom
// resources: the ordinary one while the manager runs (or the module names
// none), else OperatorGone, after which the policy may act.
func (r *Reconciler) finalizingOwnCustomResources(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, own []v1beta2.Resource) reconciler.Outcome {
	interval := r.Intervals.After(v1beta2.StateDeleting)
	gone, err := managerGone(ctx, cluster.Client, manifest.Spec.Manager, r.syncNamespace(manifest))
	if err != nil {
		return r.deleteFailed(manifest, err)
	}
	if gone == "" {
		r.goneSince.Delete(manifest.UID)
		return finalizingCustomResources(own, interval)
	}
	now := r.now()
	seen, _ := r.goneSince.LoadOrStore(manifest.UID, now)
	since, _ := seen.(time.Time)
	held, err := heldResources(ctx, cluster.Client, own[:min(len(own), maxInspected)])
	if err != nil {
		return r.deleteFailed(manifest, err)
	}
	if len(held) == 0 {
		return finalizingCustomResources(own, interval)
	}
	if r.Orphans.Policy == OrphansRemove {
		removed, err := r.removeOrphanedFinalizers(ctx, cluster.Client, manifest, held, gone, since, now)
		if err != nil {
			return r.deleteFailed(manifest, err)
		}
		if removed {
			// Look again soon: the resources may be gone now, and the
			// status shows what still holds the rest.
			return reconciler.Deleting(ReasonOperatorGone, operatorGoneMessage(held, len(own), gone, r.Orphans, since, now), interval)
		}
	}
	return reconciler.Deleting(ReasonOperatorGone, operatorGoneMessage(held, len(own), gone, r.Orphans, since, now),
		r.orphanRequeue(manifest, held, since, now))
}

// orphanRequeue looks again as a blocked removal does (backing off up to
// maxBlockedRequeue), and no later than the next resource is due under
// the remove policy.
func (r *Reconciler) orphanRequeue(manifest *v1beta2.Manifest, held []heldResource, since, now time.Time) time.Duration {
	after := r.blockedRequeue(manifest)
	if r.Orphans.Policy != OrphansRemove {
		return after
	}
	for _, h := range held {
		if len(h.own) == 0 {
			continue
		}
		if wait := max(orphanDue(h.meta.DeletionTimestamp, since, r.Orphans.after()).Sub(now), time.Second); wait < after {
			after = wait
		}
	}
	return after
}

// removeOrphanedFinalizers removes the module's own finalizers from every
// held resource that is due, and tells whether it removed any.
func (r *Reconciler) removeOrphanedFinalizers(ctx context.Context, c client.Client, manifest *v1beta2.Manifest, held []heldResource, gone string, since, now time.Time) (bool, error) {
	removed := false
	for i := range held {
		h := &held[i]
		if len(h.own) == 0 || now.Before(orphanDue(h.meta.DeletionTimestamp, since, r.Orphans.after())) {
			continue
		}
		err := removeFinalizers(ctx, c, h)
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone meanwhile, or written by someone else: the next
			// reconcile reads it again.
			continue
		case err != nil:
			return removed, fmt.Errorf("removing finalizers from %s: %w", h.subject(), err)
		}
		note := fmt.Sprintf("Removed finalizer %s from %s after it waited %s for them: %s (--orphaned-finalizers=remove)",
			strings.Join(h.own, ", "), h.subject(), waited(h.meta.DeletionTimestamp, since, now), gone)
		r.events.Warning(manifest, ReasonFinalizersRemoved, note)
		r.notes.add(manifest.UID, note)
		h.own = nil
		removed = true
	}
	return removed, nil
}

// removeFinalizers drops the resource's own finalizers with an optimistic
// lock: a finalizer someone added since it was read is never lost.
func removeFinalizers(ctx context.Context, c client.Client, h *heldResource) error {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: *h.meta.DeepCopy()}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: h.resource.Group, Version: h.resource.Version, Kind: h.resource.Kind})
	base := obj.DeepCopy()
	obj.Finalizers = slices.DeleteFunc(obj.Finalizers, func(f string) bool { return slices.Contains(h.own, f) })
	return c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// orphanDue is when the remove policy may act on a resource deleted at
// deleted: after both its deletion and the first sight of the manager
// gone, plus after. A restart of the operator forgets that sight, which
// can only delay the act.
func orphanDue(deleted *metav1.Time, since time.Time, after time.Duration) time.Time {
	start := since
	if deleted != nil && deleted.After(start) {
		start = deleted.Time
	}
	return start.Add(after)
}

// waited is how long a resource has waited, as orphanDue counts.
func waited(deleted *metav1.Time, since, now time.Time) time.Duration {
	return now.Sub(orphanDue(deleted, since, 0)).Round(time.Second)
}

// operatorGoneMessage names the manager that is gone, the resources that
// wait (at most maxNamed, with their finalizers), and what happens next.
func operatorGoneMessage(held []heldResource, total int, gone string, policy OrphanedFinalizers, since, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The module's operator is gone (%s), and %d of the module's custom resources wait for finalizers that nothing removes: ", gone, total)
	named := make([]string, 0, min(len(held), maxNamed))
	for i, h := range held {
		if i == maxNamed {
			named = append(named, fmt.Sprintf("and %d more", total-i))
			break
		}
		fs := append(slices.Clone(h.own), h.foreign...)
		named = append(named, fmt.Sprintf("%s (finalizers %s; waiting %s)", h.subject(), strings.Join(fs, ", "), waited(h.meta.DeletionTimestamp, since, now)))
	}
	b.WriteString(strings.Join(named, ", "))
	b.WriteString(". ")
	foreign := false
	for _, h := range held {
		foreign = foreign || len(h.foreign) > 0
	}
	switch policy.Policy {
	case OrphansRemove:
		fmt.Fprintf(&b, "The module's own finalizers are removed %s after a resource's deletion unless the manager is back first (--orphaned-finalizers=remove)", policy.after())
		if foreign {
			b.WriteString("; finalizers that are not the module's stay until their owners remove them")
		}
	default:
		fmt.Fprintf(&b, "Restore the manager, or remove the finalizers; the removal waits until then (--orphaned-finalizers=wait; "+
			"with --orphaned-finalizers=remove the module's own finalizers are removed after %s)", policy.after())
	}
	return b.String()
}

// heldResources reads the resources and returns those being deleted that
// still have finalizers, with the finalizers split into the module's own
// and others'.
func heldResources(ctx context.Context, c client.Reader, resources []v1beta2.Resource) ([]heldResource, error) {
	var held []heldResource
	for _, res := range resources {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind})
		if err := c.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: res.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading %s: %w", apply.Describe([]v1beta2.Resource{res}, 1), err)
		}
		if obj.DeletionTimestamp == nil || len(obj.Finalizers) == 0 {
			continue
		}
		h := heldResource{resource: res, meta: obj.ObjectMeta}
		for _, f := range obj.Finalizers {
			if moduleFinalizer(f, res.Group) {
				h.own = append(h.own, f)
			} else {
				h.foreign = append(h.foreign, f)
			}
		}
		held = append(held, h)
	}
	return held, nil
}

// operatorFinalizers are this operator's own; never the module's.
var operatorFinalizers = []string{v1beta2.KymaFinalizer, v1beta2.ManifestFinalizer, v1beta2.WatcherFinalizer}

// moduleFinalizer tells whether a finalizer on a custom resource of API
// group group is the module's own: its domain (the part before "/") is
// the group, the group's parent domain, or a subdomain of that parent
// (group operator.kyma-project.io: operator.kyma-project.io/x,
// kyma-project.io/x and sample.kyma-project.io/x are the module's).
// Kubernetes' finalizers (no domain, or kubernetes.io and k8s.io ones) and
// this operator's are never the module's; nor is one of another domain,
// which another controller put there.
func moduleFinalizer(finalizer, group string) bool {
	domain, _, ok := strings.Cut(finalizer, "/")
	if !ok || domain == "" || group == "" || slices.Contains(operatorFinalizers, finalizer) {
		return false
	}
	for _, reserved := range []string{"kubernetes.io", "k8s.io"} {
		if domain == reserved || strings.HasSuffix(domain, "."+reserved) {
			return false
		}
	}
	parent := group
	if strings.Count(group, ".") >= 2 {
		_, parent, _ = strings.Cut(group, ".")
	}
	return domain == group || domain == parent || strings.HasSuffix(domain, "."+parent)
}

// managerGone says why the module's manager is gone — it does not exist,
// or it is a Deployment, StatefulSet or DaemonSet with no available
// replica — or "" when it runs, its state cannot be told (another kind),
// or the module names none.
func managerGone(ctx context.Context, c client.Reader, manager *v1beta2.Manager, defaultNamespace string) (string, error) {
	if manager == nil {
		return "", nil
	}
	namespace := manager.Namespace
	if namespace == "" {
		namespace = defaultNamespace
	}
	subject := fmt.Sprintf("%s %s/%s", manager.Kind, namespace, manager.Name)
	obj := &unstructured.Unstructured{}
	gvk := schema.GroupVersionKind{Group: manager.Group, Version: manager.Version, Kind: manager.Kind}
	obj.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: manager.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return "its manager " + subject + " does not exist", nil
		}
		if meta.IsNoMatchError(err) {
			return "its manager's kind " + gvk.String() + " is not served", nil
		}
		return "", fmt.Errorf("reading manager %s: %w", subject, err)
	}
	field := availableField(gvk)
	if field == "" {
		return "", nil
	}
	available, _, _ := unstructured.NestedInt64(obj.Object, "status", field)
	if available > 0 {
		return "", nil
	}
	return "its manager " + subject + " has no available replica", nil
}

// availableField is the status field that counts a workload's available
// replicas; "" for kinds whose availability is not told that way.
func availableField(gvk schema.GroupVersionKind) string {
	if gvk.Group != appsv1.GroupName {
		return ""
	}
	switch gvk.Kind {
	case "Deployment", "StatefulSet", "ReplicaSet":
		return "availableReplicas"
	case "DaemonSet":
		return "numberAvailable"
	}
	return ""
}

// pendingNotes are the notes a reconcile made for the operation history,
// by Manifest UID, until its Record puts them in the status.
type pendingNotes struct {
	mu    sync.Mutex
	notes map[types.UID][]string
}

func (p *pendingNotes) add(uid types.UID, note string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.notes == nil {
		p.notes = map[types.UID][]string{}
	}
	p.notes[uid] = append(p.notes[uid], note)
}

// take returns and forgets the Manifest's pending notes.
func (p *pendingNotes) take(uid types.UID) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	notes := p.notes[uid]
	delete(p.notes, uid)
	return notes
}

// addNotes appends notes to the newest operation, keeping the last
// v1beta2.MaxOperationNotes.
func addNotes(m *v1beta2.Manifest, notes []string) {
	if len(notes) == 0 || len(m.Status.Operations) == 0 {
		return
	}
	op := &m.Status.Operations[0]
	op.Notes = append(op.Notes, notes...)
	if extra := len(op.Notes) - v1beta2.MaxOperationNotes; extra > 0 {
		op.Notes = op.Notes[extra:]
	}
}

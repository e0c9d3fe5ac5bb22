package manifest

import (
	"context"
	"fmt"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
)

// owner is the module of the Kyma that the Manifest installs: whose objects
// it may write and delete.
func (r *Reconciler) owner(manifest *v1beta2.Manifest) apply.Owner {
	owner := apply.Owner{
		Kyma:          kymaName(manifest),
		Module:        manifest.Spec.ModuleName,
		Manifest:      manifest.Namespace + "/" + manifest.Name,
		SyncNamespace: r.syncNamespace(manifest),
	}
	if t := manifest.Status.TakenOver; t != nil {
		owner.Predecessor = manifest.Namespace + "/" + t.Manifest
	}
	return owner
}

// removeOptions guard removing the Manifest's objects: a Namespace it
// created is deleted only when no other module of the runtime uses it.
func (r *Reconciler) removeOptions(manifest *v1beta2.Manifest) apply.RemoveOptions {
	return apply.RemoveOptions{
		Owner: r.owner(manifest),
		NamespaceUse: func(ctx context.Context, namespace string) (apply.NamespaceUse, error) {
			others := &v1beta2.ManifestList{}
			if err := r.List(ctx, others, client.InNamespace(manifest.Namespace),
				index.OfKyma(kymaName(manifest))); err != nil {
				return 0, fmt.Errorf("listing the runtime's other Manifests: %w", err)
			}
			return namespaceUse(manifest, others.Items, namespace), nil
		},
	}
}

// namespaceUse tells whether Manifests other than self have objects in the
// namespace: in their inventories, or their default custom resource. It
// asks the control plane, not the runtime: the other modules' inventories
// are at hand there (cached), while listing every kind in a runtime
// namespace is not cheap. An other Manifest that is being deleted too is
// waited for, so that removing a whole Kyma leaves no namespace behind.
func namespaceUse(self *v1beta2.Manifest, others []v1beta2.Manifest, namespace string) apply.NamespaceUse {
	use := apply.NamespaceFree
	for i := range others {
		other := &others[i]
		if other.UID == self.UID || !usesNamespace(other, namespace) {
			continue
		}
		if other.DeletionTimestamp.IsZero() {
			return apply.NamespaceInUse
		}
		use = apply.NamespaceInUseByLeaving
	}
	return use
}

func usesNamespace(m *v1beta2.Manifest, namespace string) bool {
	for _, r := range m.Status.Synced {
		if r.Namespace == namespace {
			return true
		}
	}
	return m.Spec.Resource != nil && m.Spec.Resource.GetNamespace() == namespace
}

// reportRemoval tells, in one event each, what a removal left in the
// runtime and why.
func (r *Reconciler) reportRemoval(ctx context.Context, manifest *v1beta2.Manifest, removal apply.Removal) {
	log := ctrl.LoggerFrom(ctx)
	if len(removal.Left) > 0 {
		log.Info("Left objects that are not the module's", "objects", removal.Left)
		r.events.Normal(manifest, "ResourcesLeft", "Left in place, not the module's: "+shortList(removal.Left))
	}
	if len(removal.Released) > 0 {
		log.Info("Released objects instead of deleting them", "objects", removal.Released)
		r.events.Normal(manifest, "ResourcesReleased", "Released (labels removed, left in place): "+shortList(removal.Released))
	}
}

func shortList(items []string) string {
	const limit = maxNamed
	if len(items) <= limit {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:limit], ", ") + fmt.Sprintf(" and %d more", len(items)-limit)
}

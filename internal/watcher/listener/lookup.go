package listener

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// RuntimeIDIndex indexes Kymas by their runtime-id label, so that a report
// finds its Kyma without scanning the fleet.
const RuntimeIDIndex = "kyma.runtimeID"

// IndexRuntimeID registers RuntimeIDIndex; call it before the cache starts.
func IndexRuntimeID(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1beta2.Kyma{}, RuntimeIDIndex, func(obj client.Object) []string {
		if id := obj.GetLabels()[v1beta2.RuntimeIDLabel]; id != "" {
			return []string{id}
		}
		return nil
	})
}

// Lookup finds the Kymas of a runtime id.
type Lookup interface {
	KymasOf(ctx context.Context, runtimeID string) ([]types.NamespacedName, error)
}

// CacheLookup looks Kymas up through RuntimeIDIndex in a cache.
type CacheLookup struct {
	Reader client.Reader
	// Namespace limits the lookup to the operator's namespace.
	Namespace string
}

// KymasOf implements Lookup.
func (l CacheLookup) KymasOf(ctx context.Context, runtimeID string) ([]types.NamespacedName, error) {
	list := &v1beta2.KymaList{}
	if err := l.Reader.List(ctx, list, client.InNamespace(l.Namespace), client.MatchingFields{RuntimeIDIndex: runtimeID}); err != nil {
		return nil, fmt.Errorf("listing Kymas of a runtime: %w", err)
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	// A Kyma being deleted is still the runtime's: the reports its deletion
	// causes there (the runtime's Kyma going) are accepted and harmless.
	for i := range list.Items {
		out = append(out, client.ObjectKeyFromObject(&list.Items[i]))
	}
	return out, nil
}

// ManifestLookup finds the Manifest of a Kyma's module.
type ManifestLookup interface {
	// ManifestOf returns the Manifest of the module for the Kyma; ok is
	// false when the Kyma has none.
	ManifestOf(ctx context.Context, kyma types.NamespacedName, module string) (manifest types.NamespacedName, ok bool, err error)
}

// CacheManifestLookup finds a Kyma's Manifest of a module by its name in a
// cache.
type CacheManifestLookup struct {
	Reader client.Reader
	// Name is the name of a Kyma's Manifest of a module (the Kyma
	// controller's naming, kyma.ManifestName).
	Name func(kymaName, module string) string
}

// ManifestOf implements ManifestLookup. The Manifest must carry the Kyma's
// and the module's labels: a name alone could be another Kyma's (Kyma "a"
// with module "b-c" and Kyma "a-b" with module "c"), and a runtime must not
// make the control plane act on another runtime's Manifest.
func (l CacheManifestLookup) ManifestOf(ctx context.Context, kyma types.NamespacedName, module string) (types.NamespacedName, bool, error) {
	key := types.NamespacedName{Namespace: kyma.Namespace, Name: l.Name(kyma.Name, module)}
	manifest := &v1beta2.Manifest{}
	if err := l.Reader.Get(ctx, key, manifest); err != nil {
		if apierrors.IsNotFound(err) {
			return key, false, nil
		}
		return key, false, fmt.Errorf("reading the Manifest of module %s: %w", module, err)
	}
	labels := manifest.Labels
	return key, labels[v1beta2.KymaNameLabel] == kyma.Name && labels[v1beta2.ModuleNameLabel] == module, nil
}

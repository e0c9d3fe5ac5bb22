package listener

import (
	"context"
	"fmt"

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

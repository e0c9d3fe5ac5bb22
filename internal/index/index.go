// Package index defines the control plane cache's field indexes, so that a
// reconcile finds a Kyma's own objects by key instead of scanning every
// object of the namespace: a label selector on the cache compares the labels
// of each object, which at 10,000 Kymas took most of the operator's CPU.
//
// The indexes exist only in the manager's informer cache (Register); the API
// server knows nothing of them, so readers that go past the cache select by
// label instead.
package index

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// KymaName is the field index of a Manifest or Secret by the Kyma it
// belongs to: the value of its v1beta2.KymaNameLabel.
const KymaName = "index.kymaName"

// Register adds the indexes to indexer (the manager's GetFieldIndexer). It
// is called once, before the cache starts.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&v1beta2.Manifest{}, &corev1.Secret{}} {
		if err := indexer.IndexField(ctx, obj, KymaName, KymaNameOf); err != nil {
			return fmt.Errorf("indexing %T by Kyma name: %w", obj, err)
		}
	}
	return nil
}

// KymaNameOf is the index function of KymaName: the Kyma an object is
// labelled with, or none.
func KymaNameOf(obj client.Object) []string {
	if name := obj.GetLabels()[v1beta2.KymaNameLabel]; name != "" {
		return []string{name}
	}
	return nil
}

// OfKyma selects, from a cache with the indexes registered, the objects of
// the named Kyma; pair it with client.InNamespace.
func OfKyma(kymaName string) client.MatchingFields {
	return client.MatchingFields{KymaName: kymaName}
}

package remote

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EnsureNamespace creates a namespace in a runtime when it is missing. The
// sync namespace is shared by every module and the catalog, so it belongs to
// no module's inventory and is never pruned.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// knownNamespace is the namespace that EnsureSyncNamespace last found or
// created in a runtime (see Recall).
type knownNamespace string

// EnsureSyncNamespace is EnsureNamespace for the one namespace every
// reconcile of a runtime's modules needs: once it is known to exist, it is
// not read again, which saves a request per reconcile. Should the runtime's
// owner delete it, the next write into it fails with NotFound, on which
// Runtimes.EvictOnError drops the memos, and the reconcile after creates it
// again.
func EnsureSyncNamespace(ctx context.Context, cluster *Cluster, name string) error {
	if known, _ := Recall[knownNamespace](cluster); string(known) == name {
		return nil
	}
	if err := EnsureNamespace(ctx, cluster.Client, name); err != nil {
		return err
	}
	Remember(cluster, knownNamespace(name))
	return nil
}

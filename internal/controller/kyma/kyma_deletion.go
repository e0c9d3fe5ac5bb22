package kyma

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Deletion that shows itself (SPEC G11). When a Kyma is deleted, the
// runtime's own Kyma is where its owner looks; it must say what is
// happening before anything of the runtime goes. So every step of the
// finalizer first mirrors the Deleting status (the Kyma's state, and each
// module's removal with what blocks it) to the runtime's Kyma, and only
// then deletes Manifests; the runtime's Kyma itself goes last, once every
// module is gone (removeRuntimeKyma). A runtime that is gone for good (its
// kubeconfig Secret deleted) has nothing to show it to, and is released as
// before.

// showDeleting mirrors the status the finalizer is about to record, o, to
// the runtime's Kyma. A runtime without its own Kyma (never created, or
// deleted by its owner) is not given one just to show this.
func (r *Reconciler) showDeleting(ctx context.Context, kyma *v1beta2.Kyma, o reconciler.Outcome) error {
	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if errors.Is(err, remote.ErrNoKubeconfigSecret) {
		return nil
	}
	if err != nil {
		return err
	}
	runtimeKyma, err := readRuntimeKyma(ctx, cluster, runtimeKymaKey(kyma, r.SyncNamespace))
	if err != nil {
		if err = client.IgnoreNotFound(err); err != nil {
			r.evictOnError(kyma, err)
			return fmt.Errorf("reading the runtime's Kyma: %w", err)
		}
		return nil
	}
	recorded := kyma.DeepCopy()
	recordOutcome(recorded, o)
	if err := mirrorStatus(ctx, cluster, runtimeKyma, recorded); err != nil {
		r.evictOnError(kyma, err)
		return fmt.Errorf("showing the deletion in the runtime's Kyma: %w", err)
	}
	return nil
}

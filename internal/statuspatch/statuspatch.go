// Package statuspatch writes an object's status the one way every
// controller here does: a merge patch of the status subresource from the
// object as it was read, and no request at all when the status did not
// change, so that a steady fleet costs no writes.
package statuspatch

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IfChanged patches obj's status from base when status(base) and
// status(obj) differ. An object deleted meanwhile is not an error.
func IfChanged[T client.Object](ctx context.Context, c client.Client, base, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(base), status(obj)) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}

package takeover

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Move is what taking over one object writes: its fields move from KLM's
// managers to this operator's, and it gets labels (this operator's marks
// of ownership) where the object's later writes will not set them.
type Move struct {
	// From are KLM's managers whose fields move; To is this operator's.
	From sets.Set[string]
	To   string
	// Labels are set on the object; nil sets none.
	Labels map[string]string
	// Claim, when set, tells from the live object's metadata whether it
	// is KLM's to hand over; one it refuses is left untouched.
	Claim func(live *metav1.ObjectMeta) bool
}

// Moved says what Apply did to one object.
type Moved string

const (
	// MovedGone says the object does not exist.
	MovedGone Moved = "Gone"
	// MovedAlready says nothing of KLM's was left to move.
	MovedAlready Moved = "Already"
	// MovedNow says its managed fields (and labels) were written.
	MovedNow Moved = "Moved"
	// MovedNotClaimed says it is not KLM's to hand over (Claim), and
	// was not touched.
	MovedNotClaimed Moved = "NotClaimed"
)

// Apply moves the live object gvk/key in one JSON patch of its metadata
// that only applies to the version read: a
// conflict is an error, and the caller reads again on its next attempt.
func (m Move) Apply(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey, now time.Time) (Moved, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return MovedGone, nil
		}
		return "", err
	}
	if m.Claim != nil && !m.Claim(&live.ObjectMeta) {
		return MovedNotClaimed, nil
	}
	fields, moved, err := MoveFields(live.ManagedFields, m.From, m.To, now)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", gvk.Kind, key, err)
	}
	labels := maps.Clone(live.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, m.Labels)
	relabel := !maps.Equal(labels, live.Labels) && len(m.Labels) > 0
	if !moved && !relabel {
		return MovedAlready, nil
	}
	// Replacing resourceVersion with the one read makes the API server
	// refuse the patch (409) when the object changed since.
	ops := []map[string]any{{"op": "replace", "path": "/metadata/resourceVersion", "value": live.ResourceVersion}}
	if moved {
		ops = append(ops, map[string]any{"op": "replace", "path": "/metadata/managedFields", "value": fields})
	}
	if relabel {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels", "value": labels})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return "", err
	}
	if err := c.Patch(ctx, live, client.RawPatch(types.JSONPatchType, body), client.FieldOwner(m.To)); err != nil {
		if apierrors.IsNotFound(err) {
			return MovedGone, nil
		}
		return "", fmt.Errorf("moving %s %s to %s: %w", gvk.Kind, strings.TrimPrefix(key.String(), "/"), m.To, err)
	}
	return MovedNow, nil
}

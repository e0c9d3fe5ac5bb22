package declarative

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ref names one applied object in a resource's status.inventory.
type Ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func refOf(o *unstructured.Unstructured) Ref {
	return Ref{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

func refsOf(objects []*unstructured.Unstructured) []Ref {
	refs := make([]Ref, 0, len(objects))
	for _, o := range objects {
		refs = append(refs, refOf(o))
	}
	return refs
}

// stale returns the refs of old that are not in current: what a new render
// no longer has, to prune.
func stale(old, current []Ref) []Ref {
	var out []Ref
	for _, r := range old {
		if !slices.Contains(current, r) {
			out = append(out, r)
		}
	}
	return out
}

// union is a followed by what of b is not in a.
func union(a, b []Ref) []Ref {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// inventoryOf reads status.inventory; an entry it cannot read is skipped.
func inventoryOf(obj *unstructured.Unstructured) []Ref {
	items, _, _ := unstructured.NestedSlice(obj.Object, "status", "inventory")
	refs := make([]Ref, 0, len(items))
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		r := Ref{}
		r.APIVersion, _ = m["apiVersion"].(string)
		r.Kind, _ = m["kind"].(string)
		r.Namespace, _ = m["namespace"].(string)
		r.Name, _ = m["name"].(string)
		if r.APIVersion != "" && r.Kind != "" && r.Name != "" {
			refs = append(refs, r)
		}
	}
	return refs
}

func inventoryValue(refs []Ref) []any {
	out := make([]any, 0, len(refs))
	for _, r := range refs {
		m := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name}
		if r.Namespace != "" {
			m["namespace"] = r.Namespace
		}
		out = append(out, m)
	}
	return out
}

// deleteOwned deletes the object r names if it still carries owner's
// label, with its UID as a precondition; it reports whether the object is
// gone (or no longer the owner's, and so left alone and forgotten).
func deleteOwned(ctx context.Context, c client.Client, r Ref, owner string) (bool, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return true, nil //nolint:nilerr // an unreadable entry cannot name anything to delete
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gv.WithKind(r.Kind))
	if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("reading %s: %w", r, err)
	}
	if live.GetLabels()[OwnerLabel] != owner {
		return true, nil
	}
	if !live.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	uid := live.GetUID()
	if err := c.Delete(ctx, live, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return true, nil
		}
		return false, fmt.Errorf("deleting %s: %w", r, err)
	}
	return false, nil
}

package takeover

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// MoveFields gives the manager `to` every field that a manager in `from`
// owns, as one Apply entry per subresource, and drops their entries. A
// field this operator's server-side apply later stops setting is then
// removed from the object, which it would not be while KLM's manager
// still owned it (the problem `kubectl`'s csaupgrade solves for
// client-side apply; KLM applied with both Apply and Update, so entries
// of either operation move). The fields' values are not touched: written
// back, only metadata.managedFields changes, so no generation moves and no
// workload rolls. It reports whether anything moved.
func MoveFields(entries []metav1.ManagedFieldsEntry, from sets.Set[string], to string, now time.Time) ([]metav1.ManagedFieldsEntry, bool, error) {
	moving := func(e metav1.ManagedFieldsEntry) bool { return from.Has(e.Manager) && e.Manager != to }
	if !slices.ContainsFunc(entries, moving) {
		return entries, false, nil
	}
	type target struct {
		index int // in out; -1 until one exists
		set   *fieldpath.Set
	}
	targets := map[string]*target{} // by subresource
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		if moving(e) {
			continue
		}
		if e.Manager == to && e.Operation == metav1.ManagedFieldsOperationApply {
			set, err := decode(e)
			if err != nil {
				return nil, false, err
			}
			targets[e.Subresource] = &target{index: len(out), set: set}
		}
		out = append(out, e)
	}
	for _, e := range entries {
		if !moving(e) {
			continue
		}
		set, err := decode(e)
		if err != nil {
			return nil, false, err
		}
		t := targets[e.Subresource]
		if t == nil {
			t = &target{index: len(out), set: &fieldpath.Set{}}
			targets[e.Subresource] = t
			out = append(out, metav1.ManagedFieldsEntry{
				Manager: to, Operation: metav1.ManagedFieldsOperationApply, APIVersion: e.APIVersion,
				FieldsType: "FieldsV1", Subresource: e.Subresource,
			})
		}
		t.set = t.set.Union(set)
	}
	stamp := metav1.NewTime(now.Truncate(time.Second))
	for _, t := range targets {
		raw, err := t.set.ToJSON()
		if err != nil {
			return nil, false, fmt.Errorf("encoding the fields of %s: %w", to, err)
		}
		out[t.index].FieldsV1 = metav1.NewFieldsV1(string(raw))
		out[t.index].Time = &stamp
	}
	return out, true, nil
}

func decode(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	if e.FieldsV1 == nil || len(e.FieldsV1.GetRawBytes()) == 0 {
		return set, nil
	}
	if err := set.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
		return nil, fmt.Errorf("reading the fields of manager %s: %w", e.Manager, err)
	}
	return set, nil
}

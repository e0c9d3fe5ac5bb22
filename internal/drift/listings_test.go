package drift_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/drift"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

func TestListingsShareAKymasListOnlyWhenTakenAfterTheFingerprint(t *testing.T) {
	ctx := context.Background()
	calls := 0
	list := func(context.Context, schema.GroupVersionKind, string) ([]metav1.PartialObjectMetadata, error) {
		calls++
		item := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "c", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels:        map[string]string{v1beta2.ModuleNameLabel: "m1", "other": "x"},
			Annotations:   map[string]string{"big": "yes"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "someone"}},
		}}
		return []metav1.PartialObjectMetadata{item}, nil
	}
	listings := drift.NewListings(time.Hour)
	runtime := remote.Identity{SecretUID: "s", Server: "https://r"}
	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	verified := time.Now()

	items, err := listings.Lister(list, runtime, "k1", verified)(ctx, configMaps, "ns")
	if err != nil || len(items) != 1 || calls != 1 {
		t.Fatalf("first check: %d items, %d calls, err %v; want 1 item from 1 call", len(items), calls, err)
	}
	kept := items[0]
	if kept.UID != "u" || kept.ResourceVersion != "7" || kept.Labels[v1beta2.ModuleNameLabel] != "m1" {
		t.Errorf("the listing lost what ReadVersions reads: %+v", kept.ObjectMeta)
	}
	if kept.Annotations != nil || kept.ManagedFields != nil || kept.Labels["other"] != "" {
		t.Errorf("the listing keeps more than ReadVersions reads: %+v", kept.ObjectMeta)
	}

	// Another module of the Kyma, verified before the List: shared.
	if _, err := listings.Lister(list, runtime, "k1", verified.Add(-time.Minute))(ctx, configMaps, "ns"); err != nil || calls != 1 {
		t.Errorf("a module verified before the listing: %d calls, err %v; want the listing shared", calls, err)
	}
	// A module verified after the List was taken: its writes may be newer.
	if _, err := listings.Lister(list, runtime, "k1", time.Now())(ctx, configMaps, "ns"); err != nil || calls != 2 {
		t.Errorf("a module verified after the listing: %d calls, err %v; want a new List", calls, err)
	}
	// Another Kyma, another runtime, another namespace: their own Lists.
	_, _ = listings.Lister(list, runtime, "k2", verified)(ctx, configMaps, "ns")
	_, _ = listings.Lister(list, remote.Identity{SecretUID: "s2", Server: "https://r"}, "k1", verified)(ctx, configMaps, "ns")
	_, _ = listings.Lister(list, runtime, "k1", verified)(ctx, configMaps, "other")
	if calls != 5 {
		t.Errorf("%d calls, want 5: a List per Kyma, runtime and namespace", calls)
	}

	// A report of a change in the Kyma's runtime: the next check reads
	// afresh, even for a module verified long before.
	calls = 0
	listings.Forget("k1")
	if _, err := listings.Lister(list, runtime, "k1", verified.Add(-time.Hour))(ctx, configMaps, "ns"); err != nil || calls != 1 {
		t.Errorf("a check after a report: %d calls, err %v; want a new List", calls, err)
	}
	if _, err := listings.Lister(list, runtime, "k1", verified.Add(-time.Hour))(ctx, configMaps, "ns"); err != nil || calls != 1 {
		t.Errorf("a second check after the report: %d calls, err %v; want the new List shared", calls, err)
	}

	// Expired listings are not used.
	short := drift.NewListings(time.Nanosecond)
	calls = 0
	for range 2 {
		_, _ = short.Lister(list, runtime, "k1", verified)(ctx, configMaps, "ns")
	}
	if calls != 2 {
		t.Errorf("%d calls with an expired listing, want 2", calls)
	}
}

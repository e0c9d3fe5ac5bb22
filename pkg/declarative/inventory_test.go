package declarative

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestStaleAndUnion(t *testing.T) {
	a := Ref{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a"}
	b := Ref{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "b"}
	c := Ref{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "a"}
	tests := []struct {
		name         string
		old, current []Ref
		wantStale    []Ref
	}{
		{"nothing recorded yet", nil, []Ref{a}, nil},
		{"unchanged", []Ref{a, b}, []Ref{b, a}, nil},
		{"one dropped", []Ref{a, b}, []Ref{a}, []Ref{b}},
		{"same name, other kind", []Ref{a, c}, []Ref{a}, []Ref{c}},
		{"everything dropped", []Ref{a, b}, nil, []Ref{a, b}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(stale(tt.old, tt.current)).To(Equal(tt.wantStale))
			g.Expect(union(tt.current, stale(tt.old, tt.current))).To(ConsistOf(union(tt.old, tt.current)))
		})
	}
}

// The inventory survives a round trip through status as the API server
// stores it.
func TestInventoryRoundTrip(t *testing.T) {
	g := NewWithT(t)
	refs := []Ref{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a"}, {APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "r"}}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	g.Expect(unstructured.SetNestedSlice(obj.Object, inventoryValue(refs), "status", "inventory")).To(Succeed())
	g.Expect(inventoryOf(obj)).To(Equal(refs))
	g.Expect(unstructured.SetNestedSlice(obj.Object, []any{"junk", map[string]any{"kind": "ConfigMap"}}, "status", "inventory")).To(Succeed())
	g.Expect(inventoryOf(obj)).To(BeEmpty(), "unreadable entries name nothing")
}

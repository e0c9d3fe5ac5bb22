package operator

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the RESTMapping calls that reach it.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func TestRememberingMapperAsksOncePerFoundKind(t *testing.T) {
	known := meta.NewDefaultRESTMapper(nil)
	kyma := schema.GroupVersionKind{Group: "operator.kyma-project.io", Version: "v1beta2", Kind: "Kyma"}
	known.Add(kyma, meta.RESTScopeNamespace)
	counting := &countingMapper{RESTMapper: known}
	m := &rememberingMapper{RESTMapper: counting}

	for range 3 {
		mapping, err := m.RESTMapping(kyma.GroupKind(), kyma.Version)
		if err != nil || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("RESTMapping(Kyma) = %v, %v; want the namespaced mapping", mapping, err)
		}
	}
	if counting.calls != 1 {
		t.Errorf("the underlying mapper was asked %d times for a found kind, want 1", counting.calls)
	}
	missing := schema.GroupKind{Group: "example.com", Kind: "Missing"}
	for range 2 {
		if _, err := m.RESTMapping(missing); !meta.IsNoMatchError(err) {
			t.Fatalf("RESTMapping(Missing) error = %v, want no match", err)
		}
	}
	if counting.calls != 3 {
		t.Errorf("the underlying mapper was asked %d times in all, want 3: a kind not found is asked again", counting.calls)
	}
}

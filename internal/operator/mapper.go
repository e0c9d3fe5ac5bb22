package operator

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newControlPlaneMapper is the manager's REST mapper: controller-runtime's
// dynamic mapper, with the mappings it found remembered. Every read from the
// manager's cache asks the mapper whether the kind is namespaced, and the
// dynamic mapper answers by asking each API group's mapper in turn (an error
// made and dropped per group): about 70 µs, a fifth of an idle drift check's
// CPU. The operator's kinds in the control plane do not change scope while
// it runs, so a mapping found once is the answer for good; kinds not found
// are not remembered.
func newControlPlaneMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: dynamic}, nil
}

type rememberingMapper struct {
	meta.RESTMapper
	found sync.Map // string -> *meta.RESTMapping
}

func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := gk.Group + "/" + gk.Kind + "/" + strings.Join(versions, ",")
	if mapping, ok := m.found.Load(key); ok {
		return mapping.(*meta.RESTMapping), nil //nolint:forcetypeassert // stored below
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.found.Store(key, mapping)
	return mapping, nil
}

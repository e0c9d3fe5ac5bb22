package remote

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FoundMappings are the REST mappings found in one cluster, by the group,
// kind and versions they were asked for. The zero value is empty and ready.
type FoundMappings struct {
	mu sync.Mutex
	m  map[string]*meta.RESTMapping
}

func (f *FoundMappings) load(key string) (*meta.RESTMapping, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.m[key]
	return m, ok
}

func (f *FoundMappings) store(key string, m *meta.RESTMapping) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*meta.RESTMapping{}
	}
	f.m[key] = m
}

// Forget drops every mapping found.
func (f *FoundMappings) Forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.m)
}

// RememberingMapper answers RESTMapping from the mappings found before and
// asks its RESTMapper only for kinds not found yet. Kinds not found are not
// remembered, so a CRD installed later is found. A kind's scope cannot
// change while its CRD exists; a remembered kind the cluster no longer
// serves fails its request with NotFound, after which the caller forgets
// (for runtimes, Cache.EvictOnError).
//
// The control plane's mapper uses it because controller-runtime's dynamic
// mapper answers every cache read by asking each API group's mapper in turn
// (~70 µs, a fifth of an idle check). A runtime's connection uses it with
// the runtime's own FoundMappings, which outlive the connection: one built
// again after an idle close needs no discovery for the kinds its modules use,
// and a closed connection's discovery data (tens of KB) is not kept.
type RememberingMapper struct {
	meta.RESTMapper
	Found *FoundMappings
}

// RESTMapping returns the remembered mapping, or asks the RESTMapper and
// remembers what it finds.
func (m RememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := gk.Group + "/" + gk.Kind + "/" + strings.Join(versions, ",")
	if mapping, ok := m.Found.load(key); ok {
		return mapping, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.Found.store(key, mapping)
	return mapping, nil
}

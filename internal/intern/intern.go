// Package intern keeps one copy of the strings that repeat across the objects
// of the operator's informer caches.
//
// A fleet's Manifests and Kymas repeat the same few strings thousands of
// times: label and annotation keys, the finalizer, the owner's API version,
// a module's name, version and OCI reference, its condition's reason and
// message, the Kyma's name in each of its Manifests. Each decoded object holds
// copies of its own, so at 200,000 Manifests the strings are about half of
// the operator's cached objects (docs/performance.md). Interning them when an
// object enters the cache keeps one copy per distinct string.
package intern

import (
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

const (
	// DefaultMaxEntries bounds a Table: a fleet's repeated strings are a
	// few per module and a few per Kyma (its name, its namespace), so
	// 10,000 runtimes need about 25,000 entries.
	DefaultMaxEntries = 1 << 16
	// DefaultMaxLength is the longest string interned: longer ones (a
	// kubeconfig, a manifest inlined in a status) are rarely shared, and
	// hashing them would cost more than it saves.
	DefaultMaxLength = 512
)

// Table maps each string to its one shared copy. It is safe for concurrent
// use: each informer runs its transform in a goroutine of its own.
//
// A Table never grows past its bound: when it is full it starts afresh. The
// objects already interned keep their strings; only the sharing between
// them and later objects is lost, so a fleet whose names change over months
// cannot make it grow without end.
type Table struct {
	maxEntries int
	maxLength  int

	mu      sync.RWMutex
	strings map[string]string
}

// NewTable returns a Table bounded by maxEntries strings of at most
// maxLength bytes each.
func NewTable(maxEntries, maxLength int) *Table {
	return &Table{maxEntries: maxEntries, maxLength: maxLength, strings: make(map[string]string)}
}

// String returns the shared copy of s, adding s when it is the first.
func (t *Table) String(s string) string {
	if s == "" || len(s) > t.maxLength {
		return s
	}
	t.mu.RLock()
	shared, ok := t.strings[s]
	t.mu.RUnlock()
	if ok {
		return shared
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if shared, ok := t.strings[s]; ok {
		return shared
	}
	if len(t.strings) >= t.maxEntries {
		t.strings = make(map[string]string, t.maxEntries/4)
	}
	t.strings[s] = s
	return s
}

// CacheTransform is what an informer cache of the operator does to each
// object before it caches it: drop its managedFields, large and never read,
// and intern its strings in t.
func CacheTransform(t *Table) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		t.Object(obj)
		return obj, nil
	}
}

// Len is the number of strings the Table holds.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.strings)
}

// Object interns the strings of obj in place: its labels, annotations,
// finalizers, owners and namespace, and every string of the rest of it (for
// a typed object its spec and status, for an unstructured one every field
// but metadata). The strings unique to one object (its name, UID and
// resourceVersion) are left alone: sharing them saves nothing, and they
// would fill the table.
func (t *Table) Object(obj any) {
	if accessor, err := meta.Accessor(obj); err == nil {
		t.objectMeta(accessor)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		for key, value := range u.Object {
			if key != "metadata" {
				u.Object[key] = t.value(value)
			}
		}
		return
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	v = v.Elem()
	for i := range v.NumField() {
		switch v.Type().Field(i).Type {
		case objectMetaType, typeMetaType:
			// Metadata is done above, field by field.
		default:
			t.walk(v.Field(i))
		}
	}
}

var (
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	typeMetaType   = reflect.TypeFor[metav1.TypeMeta]()
)

func (t *Table) objectMeta(m metav1.Object) {
	m.SetNamespace(t.String(m.GetNamespace()))
	labels, annotations := m.GetLabels(), m.GetAnnotations()
	t.stringMap(labels)
	t.stringMap(annotations)
	if _, copied := m.(*unstructured.Unstructured); copied {
		// An unstructured object hands out copies of its maps.
		if len(labels) > 0 {
			m.SetLabels(labels)
		}
		if len(annotations) > 0 {
			m.SetAnnotations(annotations)
		}
	}
	finalizers := m.GetFinalizers()
	for i := range finalizers {
		finalizers[i] = t.String(finalizers[i])
	}
	owners := m.GetOwnerReferences()
	for i := range owners {
		owners[i].APIVersion = t.String(owners[i].APIVersion)
		owners[i].Kind = t.String(owners[i].Kind)
		owners[i].Name = t.String(owners[i].Name)
	}
	if len(owners) > 0 {
		// An unstructured object hands out a copy of its owners.
		m.SetOwnerReferences(owners)
	}
}

// stringMap interns the keys and values of m in place: assigning to a key
// that is there already stores the key given, for strings as for other
// kinds whose equal values can differ in memory, so no new map is needed.
func (t *Table) stringMap(m map[string]string) {
	for key, value := range m {
		m[t.String(key)] = t.String(value)
	}
}

// walk interns every settable string reachable from v.
func (t *Table) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(t.String(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		// An interface's map[string]any is done by the Map case.
		if !v.IsNil() {
			t.walk(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == objectMetaType {
			// An embedded object's metadata (a default CR in a spec):
			// its name and UID are its own.
			if v.CanAddr() {
				t.objectMeta(v.Addr().Interface().(*metav1.ObjectMeta))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				t.walk(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes: data, not words
		}
		for i := range v.Len() {
			t.walk(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		if m, ok := v.Interface().(map[string]any); ok {
			t.value(m)
			return
		}
		if v.Type().Elem().Kind() == reflect.String {
			for iter := v.MapRange(); iter.Next(); {
				v.SetMapIndex(iter.Key(), reflect.ValueOf(t.String(iter.Value().String())).Convert(v.Type().Elem()))
			}
		}
	default:
	}
}

// value interns the strings of a decoded JSON value (unstructured content)
// and returns it: a string inside an interface cannot be replaced in place.
func (t *Table) value(v any) any {
	switch v := v.(type) {
	case string:
		return t.String(v)
	case map[string]any:
		for key, item := range v {
			v[key] = t.value(item)
		}
		return v
	case []any:
		for i := range v {
			v[i] = t.value(v[i])
		}
		return v
	default:
		return v
	}
}

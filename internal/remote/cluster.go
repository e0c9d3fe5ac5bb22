package remote

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

// Identity names one runtime: the kubeconfig Secret that registers it and
// the server that Secret points to. A Secret that is deleted and created
// again, or that is changed to point at another server, registers a new
// runtime, of which nothing remembered of the old one is true.
type Identity struct {
	SecretUID types.UID
	Server    string
}

// Cluster is everything the operator holds for one runtime: a connection
// (client, config, REST mapper) and what controllers remember of the
// runtime between reconciles (memos, see Recall). It lives and is evicted as
// one unit, so that a memo can never outlive the runtime it describes.
type Cluster struct {
	Client client.Client
	Config *rest.Config
	Mapper meta.RESTMapper

	identity Identity
	// secretVersion is the resourceVersion of the Secret the client was
	// built from; a different one means the client is stale.
	secretVersion string
	memos         *memos
}

// Identity is the runtime this cluster is a connection to.
func (c *Cluster) Identity() Identity { return c.identity }

// Applier applies the operator's objects to the runtime under
// apply.FieldManager.
func (c *Cluster) Applier() *apply.Applier { return apply.NewApplier(c.Client, c.Mapper) }

// ApplierAs applies to the runtime under its own field manager; see
// apply.NewApplierAs.
func (c *Cluster) ApplierAs(fieldManager string) *apply.Applier {
	return apply.NewApplierAs(c.Client, c.Mapper, fieldManager)
}

// Forget drops every memo of the runtime, so that the next reconcile of
// each controller syncs it afresh. Controllers call it when the runtime
// turned out to have lost what the memos say it has.
func (c *Cluster) Forget() { c.memos.forget() }

// Recall returns what was remembered of the cluster's runtime under the type
// T, and whether anything was. Each controller keeps its memo in a type of
// its own, so memos of different controllers never collide and stay opaque
// to this package. Values are copied in and out: a memo that holds a map or
// slice must be replaced, never changed in place.
func Recall[T any](c *Cluster) (T, bool) {
	v, ok := c.memos.get(reflect.TypeFor[T]())
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true //nolint:forcetypeassert // stored under its own type by Remember
}

// Remember stores v as the memo of type T of the cluster's runtime, until
// the runtime is evicted, its identity changes, or Forget is called.
func Remember[T any](c *Cluster, v T) { c.memos.set(reflect.TypeFor[T](), v) }

// memos are shared by the Clusters built for one runtime identity, so that a
// client rebuilt for rotated credentials keeps what is known of the runtime.
type memos struct {
	mu     sync.Mutex
	values map[reflect.Type]any
}

func newMemos() *memos { return &memos{values: map[reflect.Type]any{}} }

func (m *memos) get(t reflect.Type) (any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[t]
	return v, ok
}

func (m *memos) set(t reflect.Type, v any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[t] = v
}

func (m *memos) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.values)
}

func newCluster(cfg *rest.Config, httpClient *http.Client, scheme *k8sruntime.Scheme) (*Cluster, error) {
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, withPerGroupDiscovery(httpClient))
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	cl, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Cluster{Client: cl, Config: cfg, Mapper: mapper, memos: newMemos()}, nil
}

package remote

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
)

// Identity names one runtime: the kubeconfig Secret that registers it and
// the server that Secret points to. A Secret that is deleted and created
// again, or that is changed to point at another server, registers a new
// runtime, of which nothing remembered of the old one is true.
type Identity struct {
	SecretUID types.UID
	Server    string
}

// Cluster is one connection to a runtime (client, config, REST mapper) and
// what controllers remember of the runtime between reconciles (memos, see
// Recall). The connection may be closed while the runtime is idle and built
// again from the Secret (see Options.IdleTimeout); what is remembered
// belongs to the runtime's identity and outlives it, and is dropped with
// everything else when the runtime is evicted, so that a memo can never
// outlive the runtime it describes.
type Cluster struct {
	Client client.Client
	Config *rest.Config
	Mapper meta.RESTMapper

	httpClient *http.Client
	// secretVersion is the resourceVersion of the Secret the client was
	// built from; a different one means the client is stale.
	secretVersion string
	known         *known
}

// Identity is the runtime this cluster is a connection to.
func (c *Cluster) Identity() Identity { return c.known.identity }

// Applier applies the operator's objects to the runtime under
// apply.FieldManager.
func (c *Cluster) Applier() *apply.Applier { return apply.NewApplier(c.Client, c.Mapper) }

// ApplierAs applies to the runtime under its own field manager; see
// apply.NewApplierAs.
func (c *Cluster) ApplierAs(fieldManager string) *apply.Applier {
	return apply.NewApplierAs(c.Client, c.Mapper, fieldManager)
}

// As returns a client that acts in the runtime as the named user, over the
// same connection: each request carries the user to impersonate, and the
// runtime's API server authorizes it as that user. The admin credential
// stays with this connection; the user needs no credential of its own.
func (c *Cluster) As(username string) (client.Client, error) {
	impersonating := &http.Client{
		Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{UserName: username}, c.httpClient.Transport),
		Timeout:   c.httpClient.Timeout,
	}
	cl, err := client.New(c.Config, client.Options{HTTPClient: impersonating, Scheme: c.Client.Scheme(), Mapper: c.Mapper})
	if err != nil {
		return nil, fmt.Errorf("creating a client acting as %s: %w", username, err)
	}
	return cl, nil
}

// Forget drops every memo of the runtime, and the kinds it was found to
// serve, so that the next reconcile of each controller syncs it afresh.
// Controllers call it when the runtime turned out to have lost what the
// memos say it has.
func (c *Cluster) Forget() { c.known.forget() }

// close closes the connection's idle network connections at once instead
// of at the transport's idle timeout; requests in flight finish.
func (c *Cluster) close() { c.httpClient.CloseIdleConnections() }

// Recall returns what was remembered of the cluster's runtime under the type
// T, and whether anything was. Each controller keeps its memo in a type of
// its own, so memos of different controllers never collide and stay opaque
// to this package. Values are copied in and out: a memo that holds a map or
// slice must be replaced, never changed in place.
func Recall[T any](c *Cluster) (T, bool) {
	v, ok := c.known.memo(reflect.TypeFor[T]())
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true //nolint:forcetypeassert // stored under its own type by Remember
}

// Remember stores v as the memo of type T of the cluster's runtime, until
// the runtime is evicted, its identity changes, or Forget is called.
func Remember[T any](c *Cluster, v T) { c.known.remember(reflect.TypeFor[T](), v) }

// known is what the operator knows of one runtime identity beyond a
// connection: the controllers' memos and the REST mappings found in it.
// Every connection built for the identity shares it, so that neither a
// client rebuilt for rotated credentials nor one built again after an idle
// close has to learn the runtime again.
type known struct {
	identity Identity

	mu       sync.Mutex
	memos    map[reflect.Type]any
	mappings FoundMappings
	// credentials are what the Secret gave at one resourceVersion.
	credentials *credentials
	// established are the kinds whose CRDs were seen Established less
	// than NewKindHold ago (newkinds.go).
	established map[schema.GroupKind]time.Time
}

// credentials are the kubeconfig of one version of a runtime's Secret, as
// kubeconfig.Validate accepted it, and the TLS sessions of the connections
// made with it. A connection built again after an idle close from the same
// version takes both: the kubeconfig is not parsed and checked again, and
// the handshake resumes. Another version starts afresh: a session resumed
// after a rotation would present the old client certificate again.
type credentials struct {
	secretVersion string
	accepted      *kubeconfig.Kubeconfig
	sessions      tls.ClientSessionCache
}

// tlsSessionCacheSize holds the sessions of one server; a few spare for
// connections opened at once.
const tlsSessionCacheSize = 4

func newCredentials(secretVersion string, accepted *kubeconfig.Kubeconfig) *credentials {
	return &credentials{secretVersion: secretVersion, accepted: accepted, sessions: tls.NewLRUClientSessionCache(tlsSessionCacheSize)}
}

// credentialsOf are the credentials kept for the Secret of this identity at
// secretVersion, or nil when k is nil, another Secret's, or keeps another
// version's.
func (k *known) credentialsOf(secretUID types.UID, secretVersion string) *credentials {
	if k == nil || k.identity.SecretUID != secretUID {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.credentials == nil || k.credentials.secretVersion != secretVersion {
		return nil
	}
	return k.credentials
}

// keepCredentials keeps c for the next connection; c is never changed.
func (k *known) keepCredentials(c *credentials) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.credentials = c
}

func newKnown(identity Identity) *known {
	return &known{identity: identity, memos: map[reflect.Type]any{}}
}

func (k *known) memo(t reflect.Type) (any, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.memos[t]
	return v, ok
}

func (k *known) remember(t reflect.Type, v any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.memos[t] = v
}

func (k *known) forget() {
	k.mu.Lock()
	clear(k.memos)
	k.mu.Unlock()
	k.mappings.Forget()
}

func newCluster(cfg *rest.Config, httpClient *http.Client, scheme *k8sruntime.Scheme, known *known) (*Cluster, error) {
	discovery, err := apiutil.NewDynamicRESTMapper(cfg, withPerGroupDiscovery(httpClient))
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	mapper := RememberingMapper{RESTMapper: discovery, Found: &known.mappings}
	cl, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Cluster{Client: cl, Config: cfg, Mapper: mapper, httpClient: httpClient, known: known}, nil
}

// Metadata returns a client for the metadata of the runtime's objects, over
// the same connection.
func (c *Cluster) Metadata() (metadata.Interface, error) {
	return metadata.NewForConfigAndClient(c.Config, c.httpClient)
}

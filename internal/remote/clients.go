// Package remote gives the operator a client for each runtime, built from the
// runtime's kubeconfig Secret in the control plane.
//
// Building a client costs a TLS handshake and API discovery, so clients are
// cached per Kyma and reused across reconciles. A client is dropped when its
// Secret changes (new credentials, moved runtime) and when the caller reports
// that the runtime refused or could not be reached with it, so the next
// reconcile starts from the Secret again.
//
// A kubeconfig is data, never code: only inline credentials are accepted
// (see kubeconfig.Validate), and the client is built from those fields alone.
// Every request to a runtime has a timeout, and Slots caps how many
// reconciles work on one runtime at once, so that one slow runtime cannot
// stall the others.
package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
)

// KubeconfigKey is the key of a runtime's kubeconfig in its Secret.
const KubeconfigKey = "config"

// ErrNoKubeconfigSecret means no Secret registers the runtime of a Kyma.
var ErrNoKubeconfigSecret = errors.New("no kubeconfig Secret for the runtime")

// ErrInvalidKubeconfig means the Secret exists but does not hold a usable
// kubeconfig.
var ErrInvalidKubeconfig = errors.New("invalid runtime kubeconfig")

// Cluster is a connection to one runtime.
type Cluster struct {
	Client client.Client
	Config *rest.Config
	Mapper meta.RESTMapper

	// secretVersion is the resourceVersion of the Secret the client was
	// built from; a different one means the client is stale.
	secretVersion string
}

// Options tune the clients made for runtimes.
type Options struct {
	// Scheme knows the typed objects used against runtimes.
	Scheme *k8sruntime.Scheme
	// QPS and Burst limit each runtime's client.
	QPS   float32
	Burst int
	// Namespace is where kubeconfig Secrets live in the control plane.
	Namespace string
	// RequestTimeout bounds every request to a runtime, including
	// discovery; zero means none.
	RequestTimeout time.Duration
	// MaxWorkersPerRuntime caps the reconciles working on one runtime at
	// once, across controllers; zero means no cap.
	MaxWorkersPerRuntime int
}

// Clients hands out cached runtime clients.
type Clients struct {
	reader client.Reader
	opts   Options

	slots *Slots

	mu       sync.Mutex
	clusters map[string]*Cluster // by Kyma name
}

// NewClients returns a cache of runtime clients. reader reads kubeconfig
// Secrets from the control plane (the manager's cached client does).
func NewClients(reader client.Reader, opts Options) *Clients {
	return &Clients{reader: reader, opts: opts, slots: NewSlots(opts.MaxWorkersPerRuntime), clusters: map[string]*Cluster{}}
}

// TryAcquire takes one of the named Kyma's runtime slots for controller; see
// Slots.TryAcquire. Every controller that talks to runtimes shares them.
func (c *Clients) TryAcquire(controller, kymaName string) (release func(), ok bool) {
	return c.slots.TryAcquire(controller, kymaName)
}

// Get returns the client for the runtime of the named Kyma.
func (c *Clients) Get(ctx context.Context, kymaName string) (*Cluster, error) {
	secret, err := c.secret(ctx, kymaName)
	if err != nil {
		c.Evict(kymaName)
		return nil, err
	}

	c.mu.Lock()
	cached, ok := c.clusters[kymaName]
	c.mu.Unlock()
	if ok && cached.secretVersion == secret.ResourceVersion {
		return cached, nil
	}

	cluster, err := c.build(secret)
	if err != nil {
		c.Evict(kymaName)
		return nil, err
	}
	c.mu.Lock()
	c.clusters[kymaName] = cluster
	c.mu.Unlock()
	return cluster, nil
}

// Evict drops the cached client of a Kyma's runtime. Callers evict after an
// authentication or connection error so that the next attempt rebuilds the
// client from the Secret.
func (c *Clients) Evict(kymaName string) {
	c.mu.Lock()
	delete(c.clusters, kymaName)
	c.mu.Unlock()
}

// EvictOnError evicts the Kyma's client when err says the runtime refused
// our credentials or could not be reached, and reports whether it did.
func (c *Clients) EvictOnError(kymaName string, err error) bool {
	if err == nil || !IsConnectionError(err) {
		return false
	}
	c.Evict(kymaName)
	return true
}

// IsConnectionError tells errors that mean "this runtime cannot be used
// right now" (unreachable, TLS, refused credentials) from errors about a
// single request.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	// Anything that never got an API answer: dial, TLS, timeouts.
	return true
}

func (c *Clients) secret(ctx context.Context, kymaName string) (*corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := c.reader.List(ctx, list,
		client.InNamespace(c.opts.Namespace),
		client.MatchingLabels{v1beta2.KymaNameLabel: kymaName},
	); err != nil {
		return nil, fmt.Errorf("listing kubeconfig Secrets: %w", err)
	}
	switch len(list.Items) {
	case 0:
		return nil, fmt.Errorf("%w: create a Secret in namespace %s labelled %s=%s with the kubeconfig under key %q",
			ErrNoKubeconfigSecret, c.opts.Namespace, v1beta2.KymaNameLabel, kymaName, KubeconfigKey)
	case 1:
		return &list.Items[0], nil
	default:
		return nil, fmt.Errorf("%w: %d Secrets are labelled %s=%s; keep exactly one",
			ErrInvalidKubeconfig, len(list.Items), v1beta2.KymaNameLabel, kymaName)
	}
}

func (c *Clients) build(secret *corev1.Secret) (*Cluster, error) {
	raw, ok := secret.Data[KubeconfigKey]
	if !ok || len(raw) == 0 {
		return nil, fmt.Errorf("%w: Secret %s/%s has no key %q", ErrInvalidKubeconfig, secret.Namespace, secret.Name, KubeconfigKey)
	}
	accepted, err := kubeconfig.Validate(raw)
	if errors.Is(err, kubeconfig.ErrUnparsable) {
		return nil, fmt.Errorf("%w: Secret %s/%s key %q %w", ErrInvalidKubeconfig, secret.Namespace, secret.Name, KubeconfigKey, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s/%s key %q is refused: %w", ErrInvalidKubeconfig, secret.Namespace, secret.Name, KubeconfigKey, err)
	}
	cfg := restConfig(accepted)
	cfg.Timeout = c.opts.RequestTimeout
	if c.opts.QPS > 0 {
		cfg.QPS = c.opts.QPS
	}
	if c.opts.Burst > 0 {
		cfg.Burst = c.opts.Burst
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s/%s: %w", ErrInvalidKubeconfig, secret.Namespace, secret.Name, err)
	}
	return newCluster(cfg, httpClient, c.opts.Scheme, secret.ResourceVersion)
}

func newCluster(cfg *rest.Config, httpClient *http.Client, scheme *k8sruntime.Scheme, version string) (*Cluster, error) {
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	cl, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Cluster{Client: cl, Config: cfg, Mapper: mapper, secretVersion: version}, nil
}

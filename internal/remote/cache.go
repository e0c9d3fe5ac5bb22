// Package remote gives the operator one object per runtime (Cluster): a
// client built from the runtime's kubeconfig Secret in the control plane,
// its REST mapper, and what controllers remember of the runtime between
// reconciles.
//
// Building a client costs a TLS handshake and API discovery, so Clusters are
// cached per Kyma and reused across reconciles. A Cluster belongs to one
// runtime identity (Secret UID and server): a Secret that is recreated or
// points elsewhere gets a new Cluster with nothing remembered. A Cluster is
// dropped as one unit — client, mapper and memos — when the caller reports
// that the runtime refused or could not be reached, so the next reconcile
// starts from the Secret again; its memos alone are dropped when the runtime
// turns out to lack what they say it has (see Cache.EvictOnError).
//
// A fleet's runtimes are mostly idle: a Ready runtime is looked at once per
// Ready interval. A connection no reconcile asked for in Options.IdleTimeout
// is closed and its client dropped, which frees its HTTP/2 connection (and
// the health-check pings that keep it open) and its discovery data; what is
// known of the runtime stays, its last TLS session included, so the next
// reconcile pays a resumed TLS handshake and nothing else.
//
// A kubeconfig is data, never code: only inline credentials are accepted
// (see kubeconfig.Validate), and the client is built from those fields alone.
// Every request to a runtime has a timeout, and Slots caps how many
// reconciles work on one runtime API server at once, so that one slow
// runtime cannot stall the others.
package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
)

// KubeconfigKey is the key of a runtime's kubeconfig in its Secret.
const KubeconfigKey = "config"

// ErrNoKubeconfigSecret means no Secret registers the runtime of a Kyma:
// neither the cache nor the API server has one.
var ErrNoKubeconfigSecret = errors.New("no kubeconfig Secret for the runtime")

// ErrInvalidKubeconfig means the Secret exists but does not hold a usable
// kubeconfig.
var ErrInvalidKubeconfig = errors.New("invalid runtime kubeconfig")

// Runtimes is what controllers need of the runtimes: the Cluster of a
// Kyma's runtime, a slot to work on it, and eviction after errors. Cache
// implements it.
type Runtimes interface {
	// Get returns the Cluster of the named Kyma's runtime.
	Get(ctx context.Context, kymaName string) (*Cluster, error)
	// TryAcquire takes one of the slots of the runtime's API server; see
	// Cache.TryAcquire.
	TryAcquire(controller, kymaName, who string, wake func()) (release func(), ok bool)
	// EvictOnError drops what err shows to be stale; see Cache.EvictOnError.
	EvictOnError(kymaName string, err error) bool
	// Evict drops the runtime's Cluster, memos and all.
	Evict(kymaName string)
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
	// MaxWorkersPerRuntime caps the reconciles working on one runtime API
	// server at once, across controllers and Kymas (Cache.TryAcquire); zero
	// means no cap.
	MaxWorkersPerRuntime int
	// IdleTimeout closes a runtime's connection when no reconcile asked
	// for it this long; the runtime's memos and found REST mappings stay.
	// Zero keeps connections until the runtime is evicted.
	IdleTimeout time.Duration
	// Indexed says that the reader given to NewCache is an informer cache
	// with the index.KymaName index (the manager's): a Kyma's Secret is then
	// found by key, not by a label selector that scans every Secret of the
	// namespace. The API reader always selects by label, as the API server
	// has no such index.
	Indexed bool

	// observeTLS sees every TLS handshake with a runtime (tests).
	observeTLS func(tls.ConnectionState)
}

// Cache hands out one Cluster per runtime.
type Cache struct {
	reader    client.Reader
	apiReader client.Reader
	opts      Options

	slots *Slots
	now   func() time.Time

	mu       sync.Mutex
	runtimes map[string]*held // by Kyma name
	// swept is when idle connections were last looked for.
	swept time.Time
}

// held is one runtime of the cache: what is known of it, and its
// connection while one is open.
type held struct {
	known    *known
	cluster  *Cluster // nil once closed for idleness
	lastUsed time.Time
}

var _ Runtimes = (*Cache)(nil)

// NewCache returns a cache of runtime Clusters. reader reads kubeconfig
// Secrets from the control plane (the manager's cached client does);
// apiReader reads them past the cache (the manager's APIReader), to confirm
// that a Secret the cache does not have is really gone before a runtime is
// treated as gone. A nil apiReader trusts the cache.
func NewCache(reader, apiReader client.Reader, opts Options) *Cache {
	return &Cache{
		reader: reader, apiReader: apiReader, opts: opts,
		slots: NewSlots(opts.MaxWorkersPerRuntime), now: time.Now, runtimes: map[string]*held{},
	}
}

// TryAcquire takes, for controller, one of the slots of the API server the
// named Kyma's runtime is reached at; see Slots.TryAcquire. Every controller
// that talks to runtimes shares them, and so does every Kyma whose
// kubeconfig points at that server: a runtime registered under many Kymas
// is still one runtime, and a hanging one holds MaxWorkersPerRuntime
// workers, not that many per Kyma.
func (c *Cache) TryAcquire(controller, kymaName, who string, wake func()) (release func(), ok bool) {
	if !c.slots.capped() {
		return func() {}, true
	}
	return c.slots.TryAcquire(controller, c.slotKey(kymaName), who, wake)
}

// Workers tells the slots how many reconciles controller runs at once, so
// that a runtime nobody competes with may use the idle ones (Slots).
func (c *Cache) Workers(controller string, n int) {
	c.slots.Workers(controller, n)
}

// slotLookupTimeout bounds the read of a Kyma's Secret to find its slots;
// from an informer cache it takes no request and does not wait.
const slotLookupTimeout = 10 * time.Second

// slotKey names the runtime whose slots the named Kyma's reconciles take:
// the server of its kubeconfig Secret as kubeconfig.Validate accepted it
// (serverKey). The Secret is read from the reader only, the operator's
// informer cache, which costs no request. Its kubeconfig is validated only
// when no connection was built from this version of the Secret; what is
// accepted is kept for the connection Get builds next, so it is not
// validated twice. A Kyma whose Secret the cache does not have (or has more
// than once), or whose kubeconfig is refused, takes slots under its own
// name: Get then fails for the same reason and reaches no runtime.
func (c *Cache) slotKey(kymaName string) string {
	ctx, cancel := context.WithTimeout(context.Background(), slotLookupTimeout)
	defer cancel()
	list, err := c.list(ctx, c.reader, c.byKyma(kymaName), client.UnsafeDisableDeepCopy)
	if err != nil || len(list) != 1 {
		return "kyma:" + kymaName
	}
	secret := &list[0]
	c.mu.Lock()
	h := c.runtimes[kymaName]
	c.mu.Unlock()
	var prior *known
	if h != nil {
		prior = h.known
	}
	if creds := prior.credentialsOf(secret.UID, secret.ResourceVersion); creds != nil {
		return serverKey(creds.accepted.Server)
	}
	creds, err := accept(secret)
	if err != nil {
		return "kyma:" + kymaName
	}
	identity := Identity{SecretUID: secret.UID, Server: creds.accepted.Server}
	switch {
	case prior == nil:
		k := newKnown(identity)
		k.keepCredentials(creds)
		c.mu.Lock()
		if c.runtimes[kymaName] == nil {
			c.runtimes[kymaName] = &held{known: k}
		}
		c.mu.Unlock()
	case prior.identity == identity:
		prior.keepCredentials(creds) // rotated credentials of the same runtime
	default:
		// Another runtime now: Get starts it afresh, memos and all.
	}
	return serverKey(creds.accepted.Server)
}

// serverKey is a runtime API server's URL as slots count it: scheme and
// host in lower case, the port always written, the path without a trailing
// slash (a path can tell clusters behind one proxy apart, so it stays). Two
// spellings of one URL are one server; two host names or addresses of one
// machine are two, as they are two runtimes everywhere else in this package.
func serverKey(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return "server:" + server
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = "443"
		if strings.EqualFold(u.Scheme, "http") {
			port = "80"
		}
	}
	return "server:" + strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(host, port) + strings.TrimRight(u.EscapedPath(), "/")
}

// Get returns the Cluster of the named Kyma's runtime. The same Cluster is
// returned while the Secret is unchanged and the connection was not closed
// for idleness. A changed Secret gets a new client; what is known of the
// runtime stays only when the Secret still points at the same server.
func (c *Cache) Get(ctx context.Context, kymaName string) (*Cluster, error) {
	secret, err := c.secret(ctx, kymaName)
	if err != nil {
		c.Evict(kymaName)
		return nil, err
	}

	now := c.now()
	c.mu.Lock()
	c.closeIdleLocked(now)
	h := c.runtimes[kymaName]
	if h != nil && h.cluster != nil && h.known.identity.SecretUID == secret.UID && h.cluster.secretVersion == secret.ResourceVersion {
		h.lastUsed = now
		cluster := h.cluster
		c.mu.Unlock()
		return cluster, nil
	}
	var prior *known
	if h != nil {
		prior = h.known
	}
	c.mu.Unlock()

	cluster, err := c.build(secret, prior)
	if err != nil {
		c.Evict(kymaName)
		return nil, err
	}
	c.mu.Lock()
	if replaced := c.runtimes[kymaName]; replaced != nil && replaced.cluster != nil {
		replaced.cluster.close()
	}
	c.runtimes[kymaName] = &held{known: cluster.known, cluster: cluster, lastUsed: now}
	c.mu.Unlock()
	return cluster, nil
}

// closeIdleLocked closes the connections no reconcile asked for in
// IdleTimeout, looking at most twice per IdleTimeout; c.mu is held.
func (c *Cache) closeIdleLocked(now time.Time) {
	idle := c.opts.IdleTimeout
	if idle <= 0 || now.Sub(c.swept) < idle/2 {
		return
	}
	c.swept = now
	for _, h := range c.runtimes {
		if h.cluster != nil && now.Sub(h.lastUsed) >= idle {
			h.cluster.close()
			h.cluster = nil
		}
	}
}

// Evict drops the Cluster of a Kyma's runtime: client, mapper and memos.
func (c *Cache) Evict(kymaName string) {
	c.mu.Lock()
	h := c.runtimes[kymaName]
	delete(c.runtimes, kymaName)
	c.mu.Unlock()
	if h != nil && h.cluster != nil {
		h.cluster.close()
	}
}

// EvictOnError drops what err, returned by a request to the named Kyma's
// runtime, shows to be stale, and reports whether it evicted the Cluster:
//   - the runtime refused our credentials or could not be reached
//     (IsConnectionError): the whole Cluster, so that the next attempt
//     rebuilds the client from the Secret;
//   - the runtime lacks a resource or kind (IsMissing): the memos, which
//     may say it was applied (the runtime was replaced by an empty one, or
//     someone deleted it), so that the next reconcile applies it again.
func (c *Cache) EvictOnError(kymaName string, err error) bool {
	switch {
	case err == nil:
		return false
	case IsConnectionError(err):
		c.Evict(kymaName)
		return true
	case IsMissing(err):
		c.mu.Lock()
		h := c.runtimes[kymaName]
		c.mu.Unlock()
		if h != nil {
			h.known.forget()
		}
	}
	return false
}

// secret returns the one kubeconfig Secret of the named Kyma. When the cache
// has none, the API server is asked: a cache that has not caught up yet must
// not make the operator treat a runtime as gone (and release its Manifests
// without cleaning up) or skip it.
func (c *Cache) secret(ctx context.Context, kymaName string) (*corev1.Secret, error) {
	// Read on every reconcile and never changed: no copy of the Secret.
	list, err := c.list(ctx, c.reader, c.byKyma(kymaName), client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 && c.apiReader != nil {
		if list, err = c.list(ctx, c.apiReader, client.MatchingLabels{v1beta2.KymaNameLabel: kymaName}); err != nil {
			return nil, fmt.Errorf("confirming that the runtime has no kubeconfig Secret: %w", err)
		}
	}
	switch len(list) {
	case 0:
		return nil, fmt.Errorf("%w: create a Secret in namespace %s labelled %s=%s with the kubeconfig under key %q",
			ErrNoKubeconfigSecret, c.opts.Namespace, v1beta2.KymaNameLabel, kymaName, KubeconfigKey)
	case 1:
		return &list[0], nil
	default:
		return nil, fmt.Errorf("%w: %d Secrets are labelled %s=%s; keep exactly one",
			ErrInvalidKubeconfig, len(list), v1beta2.KymaNameLabel, kymaName)
	}
}

// byKyma selects the kubeconfig Secret of the named Kyma in c.reader.
func (c *Cache) byKyma(kymaName string) client.ListOption {
	if c.opts.Indexed {
		return index.OfKyma(kymaName)
	}
	return client.MatchingLabels{v1beta2.KymaNameLabel: kymaName}
}

func (c *Cache) list(ctx context.Context, reader client.Reader, opts ...client.ListOption) ([]corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := reader.List(ctx, list, append(opts, client.InNamespace(c.opts.Namespace))...); err != nil {
		return nil, fmt.Errorf("listing kubeconfig Secrets: %w", err)
	}
	return list.Items, nil
}

// build makes a connection from the Secret. It shares prior, what is known
// of the runtime, when the Secret still names the same runtime.
func (c *Cache) build(secret *corev1.Secret, prior *known) (*Cluster, error) {
	// A connection built again after an idle close, from the Secret it was
	// built from before, takes the kubeconfig as it was validated then:
	// parsing and checking it again was 6% of an idle fleet's CPU.
	creds := prior.credentialsOf(secret.UID, secret.ResourceVersion)
	if creds == nil {
		var err error
		if creds, err = accept(secret); err != nil {
			return nil, err
		}
	}
	accepted := creds.accepted
	cfg := restConfig(accepted)
	cfg.Timeout = c.opts.RequestTimeout
	if c.opts.QPS > 0 {
		cfg.QPS = c.opts.QPS
	}
	if c.opts.Burst > 0 {
		cfg.Burst = c.opts.Burst
	}
	state := prior
	if identity := (Identity{SecretUID: secret.UID, Server: accepted.Server}); state == nil || state.identity != identity {
		state = newKnown(identity)
	}
	state.keepCredentials(creds)
	httpClient, err := httpClientFor(cfg, creds.sessions, c.opts.observeTLS)
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s/%s: %w", ErrInvalidKubeconfig, secret.Namespace, secret.Name, err)
	}
	cluster, err := newCluster(cfg, httpClient, c.opts.Scheme, state)
	if err != nil {
		return nil, err
	}
	cluster.secretVersion = secret.ResourceVersion
	return cluster, nil
}

// accept validates the kubeconfig of secret (kubeconfig.Validate) and
// returns it as the credentials of this version of the Secret.
func accept(secret *corev1.Secret) (*credentials, error) {
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
	return newCredentials(secret.ResourceVersion, accepted), nil
}

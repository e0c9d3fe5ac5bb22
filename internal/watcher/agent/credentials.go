package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// credentials keeps the agent's certificates current. It watches its two
// Secrets in the runtime (written there by the control plane) and swaps
// certificates as soon as they change: a rotated client certificate is used
// from the next connection on, and connections made with the old one are
// closed once idle, so rotation needs no restart and loses no report — the
// listener accepts the old certificate while it is valid.
type credentials struct {
	opts    Options
	metrics *metrics.Agent
	log     logr.Logger

	serving atomic.Pointer[tls.Certificate]
	client  atomic.Pointer[clientState]

	mu          sync.Mutex
	servingData []byte
	clientData  []byte
}

type clientState struct {
	http      *http.Client
	transport *http.Transport
}

func newCredentials(opts Options, m *metrics.Agent, log logr.Logger) *credentials {
	return &credentials{opts: opts, metrics: m, log: log}
}

// run watches the Secrets until ctx is done. Each informer lists and watches
// one Secret by name, which the agent's Role allows by resourceNames.
func (c *credentials) run(ctx context.Context, cs kubernetes.Interface) {
	var wg sync.WaitGroup
	for name, load := range map[string]func(*corev1.Secret){
		c.opts.ServingSecret: c.loadServing,
		c.opts.ClientSecret:  c.loadClient,
	} {
		lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "secrets", c.opts.Namespace, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		handle := func(obj any) {
			if s, ok := obj.(*corev1.Secret); ok {
				load(s)
			}
		}
		_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
			ListerWatcher: lw,
			ObjectType:    &corev1.Secret{},
			Handler: cache.ResourceEventHandlerFuncs{
				AddFunc:    handle,
				UpdateFunc: func(_, obj any) { handle(obj) },
			},
		})
		wg.Go(func() { informer.RunWithContext(ctx) })
	}
	wg.Wait()
	if st := c.client.Load(); st != nil {
		st.transport.CloseIdleConnections()
	}
}

func (c *credentials) loadServing(s *corev1.Secret) {
	data := joinData(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Equal(data, c.servingData) {
		return
	}
	cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		c.log.Error(err, "Loading the serving certificate", "secret", s.Name)
		return
	}
	c.serving.Store(&cert)
	c.servingData = data
	c.metrics.CertificateReloads.WithLabelValues("serving").Inc()
	c.log.Info("Loaded the serving certificate", "secret", s.Name, "notAfter", cert.Leaf.NotAfter)
}

func (c *credentials) loadClient(s *corev1.Secret) {
	data := joinData(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], s.Data[pki.CAKey])
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Equal(data, c.clientData) {
		return
	}
	state, err := newClientState(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], s.Data[pki.CAKey], c.opts)
	if err != nil {
		c.log.Error(err, "Loading the client certificate", "secret", s.Name)
		return
	}
	old := c.client.Swap(state)
	if old != nil {
		old.transport.CloseIdleConnections()
	}
	c.clientData = data
	c.metrics.CertificateReloads.WithLabelValues("client").Inc()
	cert := state.transport.TLSClientConfig.Certificates[0].Leaf
	c.log.Info("Loaded the client certificate", "secret", s.Name, "runtimeID", cert.Subject.CommonName, "notAfter", cert.NotAfter)
}

// newClientState builds the HTTP client that reports with certPEM/keyPEM and
// trusts only caPEM for the listener, over TLS 1.3.
func newClientState(certPEM, keyPEM, caPEM []byte, opts Options) (*clientState, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing the key pair: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate to verify the listener with")
	}
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			RootCAs:      pool,
			Certificates: []tls.Certificate{cert},
		},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: opts.Workers + 1,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: opts.RequestTimeout,
	}
	return &clientState{http: &http.Client{Transport: transport}, transport: transport}, nil
}

func (c *credentials) httpClient() *http.Client {
	if st := c.client.Load(); st != nil {
		return st.http
	}
	return nil
}

// getCertificate fits tls.Config.GetCertificate for the webhook server.
func (c *credentials) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.serving.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("the serving certificate is not loaded yet")
}

// ready reports whether both certificates are loaded.
func (c *credentials) ready() bool {
	return c.serving.Load() != nil && c.client.Load() != nil
}

func joinData(parts ...[]byte) []byte {
	return bytes.Join(parts, []byte{0})
}

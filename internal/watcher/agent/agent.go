// Package agent is the runtime-watcher: an admission webhook in a runtime
// that tells the control plane's listener, over mutual TLS, when a watched
// object really changed, so that the control plane acts at once instead of
// polling the fleet (SPEC R9).
//
// The webhook always allows the request and answers before reporting: the
// runtime's API never waits for the control plane, and the webhook is
// registered with failurePolicy Ignore, so even a dead agent blocks nothing.
// Reports are delivered at least once within bounds (see sender) and the
// control plane keeps a periodic reconcile as the second path.
//
// The same code runs as the runtime-watcher binary in a runtime and
// in-process in tests and the dev environment.
package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
)

// Default names of the agent's Secrets in its runtime namespace; the
// control plane writes them.
const (
	DefaultClientSecret  = "runtime-watcher-client"
	DefaultServingSecret = "runtime-watcher-serving"
)

// Options configure an agent.
type Options struct {
	// Config reaches the runtime's API server, to read the agent's Secrets.
	Config *rest.Config
	// Namespace holds the agent's Secrets.
	Namespace string
	// ClientSecret and ServingSecret name them.
	ClientSecret, ServingSecret string

	// ListenAddress is the webhook's HTTPS address ("127.0.0.1:0" picks a
	// free port; see WebhookURL).
	ListenAddress string
	// MetricsAddress serves /metrics, /healthz and /readyz over plain HTTP;
	// "" or "0" disables it.
	MetricsAddress string

	// ListenerURL is the control plane's listener, https://host:port.
	ListenerURL string
	// KymaName is the control-plane Kyma of this runtime, named in reports of
	// objects that carry no Kyma label.
	KymaName string

	// CoalesceWindow is how long a report waits for later reports of the same
	// object to replace it.
	CoalesceWindow time.Duration
	// Workers send reports in parallel.
	Workers int
	// MaxAttempts bounds the attempts per report.
	MaxAttempts int
	// BaseBackoff and MaxBackoff bound the delay between attempts.
	BaseBackoff, MaxBackoff time.Duration
	// MaxPending bounds the objects waiting to be reported.
	MaxPending int
	// MaxReportBytes drops bigger reports.
	MaxReportBytes int
	// HeartbeatInterval is how often the agent tells the listener it is
	// alive; 0 disables heartbeats.
	HeartbeatInterval time.Duration
	// RequestTimeout bounds one request to the listener.
	RequestTimeout time.Duration

	// Logger logs; the zero value discards.
	Logger logr.Logger
}

// DefaultOptions are the agent's defaults; flags override them.
func DefaultOptions() Options {
	return Options{
		Namespace:         "kyma-system",
		ClientSecret:      DefaultClientSecret,
		ServingSecret:     DefaultServingSecret,
		ListenAddress:     ":9443",
		MetricsAddress:    ":8080",
		CoalesceWindow:    100 * time.Millisecond,
		Workers:           4,
		MaxAttempts:       6,
		BaseBackoff:       200 * time.Millisecond,
		MaxBackoff:        10 * time.Second,
		MaxPending:        10000,
		MaxReportBytes:    report.MaxBytes,
		HeartbeatInterval: 30 * time.Second,
		RequestTimeout:    5 * time.Second,
	}
}

// Agent is one runtime-watcher.
type Agent struct {
	opts    Options
	log     logr.Logger
	metrics *metrics.Agent
	creds   *credentials
	sender  *sender
	client  kubernetes.Interface

	webhook   net.Listener
	metricsLn net.Listener
	started   atomic.Bool
}

// New checks opts and binds the agent's ports, so that WebhookURL is known
// before Start.
func New(opts Options) (*Agent, error) {
	if opts.Config == nil {
		return nil, errors.New("agent: no runtime config")
	}
	if opts.ListenerURL == "" {
		return nil, errors.New("agent: no listener URL")
	}
	if opts.Workers <= 0 || opts.MaxAttempts <= 0 || opts.MaxPending <= 0 || opts.MaxReportBytes <= 0 || opts.RequestTimeout <= 0 {
		return nil, errors.New("agent: workers, max attempts, max pending, max report bytes and request timeout must be positive")
	}
	client, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("agent: creating the runtime client: %w", err)
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	a := &Agent{opts: opts, log: log, metrics: metrics.NewAgent(), client: client}
	a.creds = newCredentials(opts, a.metrics, log.WithName("credentials"))
	a.sender = newSender(opts, a.creds, a.metrics, log.WithName("sender"))

	if a.webhook, err = net.Listen("tcp", opts.ListenAddress); err != nil {
		return nil, fmt.Errorf("agent: listening on %s: %w", opts.ListenAddress, err)
	}
	if opts.MetricsAddress != "" && opts.MetricsAddress != "0" {
		if a.metricsLn, err = net.Listen("tcp", opts.MetricsAddress); err != nil {
			_ = a.webhook.Close()
			return nil, fmt.Errorf("agent: listening on %s: %w", opts.MetricsAddress, err)
		}
	}
	return a, nil
}

// WebhookURL is the base URL of the webhook, for a URL webhook
// configuration when the agent runs outside the runtime (tests, dev).
func (a *Agent) WebhookURL() string {
	return "https://" + a.webhook.Addr().String()
}

// Metrics are the agent's metrics.
func (a *Agent) Metrics() *metrics.Agent { return a.metrics }

// Ready reports whether the agent has its certificates.
func (a *Agent) Ready() bool { return a.creds.ready() }

// Start runs the agent until ctx is done.
func (a *Agent) Start(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: started twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	mux := http.NewServeMux()
	mux.HandleFunc(ValidatePath, a.serveValidate)
	webhook := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       90 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: a.creds.getCertificate,
		},
		ErrorLog: newErrorLog(a.log.WithName("webhook")),
	}
	servers := []*http.Server{webhook}

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() {
		if err := webhook.ServeTLS(a.webhook, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("webhook server: %w", err)
		}
	})
	if a.metricsLn != nil {
		ops := &http.Server{Handler: a.opsHandler(), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, ops)
		wg.Go(func() {
			if err := ops.Serve(a.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("metrics server: %w", err)
			}
		})
	}
	wg.Go(func() { a.creds.run(ctx, a.client) })
	wg.Go(func() { a.sender.run(ctx) })
	if a.opts.HeartbeatInterval > 0 {
		wg.Go(func() { a.heartbeats(ctx) })
	}
	a.log.Info("Runtime watcher started", "webhook", a.webhook.Addr().String(), "listener", a.opts.ListenerURL)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
		cancel()
	}
	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	wg.Wait()
	return err
}

func (a *Agent) heartbeats(ctx context.Context) {
	ticker := time.NewTicker(a.opts.HeartbeatInterval)
	defer ticker.Stop()
	for {
		if a.creds.ready() {
			a.sender.heartbeat(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (a *Agent) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.creds.ready() {
			http.Error(w, "certificates not loaded", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

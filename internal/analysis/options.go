package analysis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	"k8s.io/client-go/transport"
)

// Options say where the analyses' Prometheus is and how it is reached: the
// SRE's choice (flags), never a rollout author's, so that a ModuleRollout
// cannot point the operator at an address of its own.
type Options struct {
	// PrometheusURL is the base URL of the Prometheus HTTP API (Prometheus,
	// Thanos Query, Mimir's Prometheus API, ...); empty: prometheus
	// analyses are inconclusive, and hold their rollouts.
	PrometheusURL string
	// BearerTokenFile holds a token sent with every query, read again
	// every minute (a projected ServiceAccount token rotates); https only.
	BearerTokenFile string
	// CAFile holds the PEM CA certificates that verify an https
	// Prometheus, instead of the system's.
	CAFile string
	// Timeout bounds each query and each read of a runtime; zero is
	// DefaultOptions'.
	Timeout time.Duration
	// Concurrency is how many queries and runtime reads run at once; zero
	// is DefaultOptions'.
	Concurrency int
}

// DefaultOptions are the analyses' defaults; flags override them.
func DefaultOptions() Options {
	return Options{Timeout: 10 * time.Second, Concurrency: 8}
}

// BindFlags binds the options to the operator's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.PrometheusURL, "analysis-prometheus-url", o.PrometheusURL, "Base URL of the Prometheus HTTP API that ModuleRollouts' prometheus analyses query (health gates, docs/rollouts.md); empty: such analyses are inconclusive and hold their rollout's next wave.")
	fs.StringVar(&o.BearerTokenFile, "analysis-prometheus-bearer-token-file", o.BearerTokenFile, "File holding a bearer token sent to --analysis-prometheus-url (https only), read again every minute.")
	fs.StringVar(&o.CAFile, "analysis-prometheus-ca-file", o.CAFile, "PEM file of the CA certificates that verify --analysis-prometheus-url, instead of the system's.")
	fs.DurationVar(&o.Timeout, "analysis-timeout", o.Timeout, "Longest wait for one Prometheus query or one read of a runtime's custom resource; past it the analysis is inconclusive. 0 means the default.")
	fs.IntVar(&o.Concurrency, "analysis-concurrency", o.Concurrency, "Prometheus queries and runtime reads of analyses run at once. 0 means the default.")
}

// roundTripper is the HTTP transport to Prometheus: its CA, its token.
func (o Options) roundTripper() (http.RoundTripper, error) {
	u, err := url.Parse(o.PrometheusURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--analysis-prometheus-url %q is not an http(s) URL with a host", redacted(o.PrometheusURL))
	}
	base, ok := promapi.DefaultRoundTripper.(*http.Transport)
	if !ok {
		return nil, errors.New("analysis: the Prometheus client's default transport is not an *http.Transport")
	}
	t := base.Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		if u.Scheme != "https" {
			return nil, errors.New("--analysis-prometheus-ca-file needs an https --analysis-prometheus-url")
		}
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --analysis-prometheus-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--analysis-prometheus-ca-file %s holds no PEM certificate", o.CAFile)
		}
		t.TLSClientConfig.RootCAs = pool
	}
	if o.BearerTokenFile == "" {
		return t, nil
	}
	if u.Scheme != "https" {
		// Anyone on the way could read it, and use it.
		return nil, errors.New("--analysis-prometheus-bearer-token-file needs an https --analysis-prometheus-url: a token is never sent over plain http")
	}
	// Read here once, so that a wrong path stops the start (the error
	// names the file, never what it holds), then every minute.
	rt, err := transport.NewBearerAuthWithRefreshRoundTripper("", o.BearerTokenFile, t)
	if err != nil {
		return nil, fmt.Errorf("reading --analysis-prometheus-bearer-token-file %s: %w", o.BearerTokenFile, err)
	}
	return rt, nil
}

// redacted is a URL without the password it may hold.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

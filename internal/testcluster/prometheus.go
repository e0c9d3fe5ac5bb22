package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
)

// binPrometheus is built by `make prometheus` (and `make test`), not by testbin.
const binPrometheus = "prometheus"

// prometheusReadyTimeout is generous for a loaded machine; readiness is polled.
const prometheusReadyTimeout = time.Minute

// PrometheusOptions say what a test's Prometheus scrapes.
type PrometheusOptions struct {
	// Targets are the host:port addresses whose /metrics it scrapes.
	Targets []string
	// ScrapeInterval is how often; one second when zero.
	ScrapeInterval time.Duration
	// Labels are added to every target's series, as the Prometheus
	// Operator adds namespace and pod, which alert rules group by.
	Labels map[string]string
}

// Prometheus is a real Prometheus server (bin/prometheus, built from its
// Go module) scraping the targets a test serves, for code that queries its
// HTTP API. A sample set on a target is queryable once a scrape took it:
// wait for it by polling, never by sleeping.
type Prometheus struct {
	dir string
	url string
	p   *process
}

// StartPrometheus starts Prometheus on a free loopback port and returns
// once it is ready.
func StartPrometheus(ctx context.Context, opts PrometheusOptions) (_ *Prometheus, err error) {
	path, err := prometheusPath()
	if err != nil {
		return nil, err
	}
	staleDirsOnce.Do(removeStaleDirs)
	dir, err := os.MkdirTemp("", dirPrefix+"prometheus-")
	if err != nil {
		return nil, fmt.Errorf("creating the prometheus directory: %w", err)
	}
	prom := &Prometheus{dir: dir}
	defer func() {
		if err != nil {
			_ = prom.Stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", ownerFile, err)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, prometheusConfig(opts), 0o600); err != nil {
		return nil, fmt.Errorf("writing the prometheus config: %w", err)
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		address := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		prom.url = "http://" + address
		err = prom.start(ctx, path, []string{
			"--config.file=" + config,
			"--storage.tsdb.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + address,
			"--log.level=warn",
		})
		if err == nil {
			return prom, nil
		}
		if attempt == portAttempts || !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
}

func (p *Prometheus) start(ctx context.Context, path string, args []string) error {
	proc, err := startProcess(binPrometheus, path, args, filepath.Join(p.dir, "prometheus.log"))
	if err != nil {
		return err
	}
	p.p = proc
	err = proc.waitReady(ctx, prometheusReadyTimeout, func(ctx context.Context) error {
		return httpOK(ctx, p.url+"/-/ready")
	})
	if err == nil {
		return nil
	}
	_ = proc.stop()
	if proc.bindFailed() {
		return fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// URL is where Prometheus's HTTP API is, http://127.0.0.1:PORT.
func (p *Prometheus) URL() string { return p.url }

// Stop kills Prometheus and removes its directory; safe to call more than once.
func (p *Prometheus) Stop() error {
	var errs []error
	if p.p != nil {
		errs = append(errs, p.p.stop())
	}
	if err := os.RemoveAll(p.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", p.dir, err))
	}
	return errors.Join(errs...)
}

// prometheusConfig scrapes the targets; honor_labels keeps the labels the
// test set (a test's "instance" or "job" label is not renamed).
func prometheusConfig(opts PrometheusOptions) []byte {
	interval := opts.ScrapeInterval
	if interval <= 0 {
		interval = time.Second
	}
	targets := make([]string, 0, len(opts.Targets))
	for _, t := range opts.Targets {
		targets = append(targets, strconv.Quote(t))
	}
	labels := make([]string, 0, len(opts.Labels))
	for k, v := range opts.Labels {
		labels = append(labels, k+": "+strconv.Quote(v))
	}
	return fmt.Appendf(nil, `global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: test
    honor_labels: true
    static_configs:
      - targets: [%[2]s]
        labels: {%[3]s}
`, interval, strings.Join(targets, ", "), strings.Join(labels, ", "))
}

// prometheusPath is bin/prometheus, or an error that says how to build it.
func prometheusPath() (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, binPrometheus)
	if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is missing or not executable: run `make prometheus` (make test builds it too)", path)
	}
	return path, nil
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// Gauges is a scrape target whose gauges a test sets: an HTTP server on
// loopback serving them at /metrics in the Prometheus format.
type Gauges struct {
	server   *http.Server
	listener net.Listener

	registry *prometheus.Registry
	mu       sync.Mutex
	vecs     map[string]*prometheus.GaugeVec
}

// StartGauges starts serving an empty set of gauges.
func StartGauges() (*Gauges, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the gauges' scrapes: %w", err)
	}
	g := &Gauges{listener: listener, registry: prometheus.NewRegistry(), vecs: map[string]*prometheus.GaugeVec{}}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{}))
	g.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = g.server.Serve(listener) }()
	return g, nil
}

// Target is the host:port a Prometheus scrapes.
func (g *Gauges) Target() string { return g.listener.Addr().String() }

// Set sets the gauge name with labels to value. Every series of one name
// has the same label names, those of its first Set.
func (g *Gauges) Set(name string, labels map[string]string, value float64) {
	g.vec(name, labels).With(labels).Set(value)
}

// Delete removes the series of name with labels: the next scrape no
// longer has it.
func (g *Gauges) Delete(name string, labels map[string]string) {
	g.vec(name, labels).Delete(labels)
}

func (g *Gauges) vec(name string, labels map[string]string) *prometheus.GaugeVec {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v, ok := g.vecs[name]; ok {
		return v
	}
	names := make([]string, 0, len(labels))
	for k := range labels {
		names = append(names, k)
	}
	slices.Sort(names)
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Set by the test."}, names)
	g.registry.MustRegister(v)
	g.vecs[name] = v
	return v
}

// Close stops serving.
func (g *Gauges) Close() error { return g.server.Close() }

// Samples runs an instant query and returns its vector's values by the
// value of label: what the last scrapes took, for a test waiting (by
// polling) until Prometheus has the gauges it set.
func (p *Prometheus) Samples(ctx context.Context, query, label string) (map[string]float64, error) {
	c, err := promapi.NewClient(promapi.Config{Address: p.url})
	if err != nil {
		return nil, err
	}
	value, _, err := promv1.NewAPI(c).Query(ctx, query, time.Time{})
	if err != nil {
		return nil, err
	}
	vector, ok := value.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("%s is a %s, not a vector", query, value.Type())
	}
	out := make(map[string]float64, len(vector))
	for _, s := range vector {
		out[string(s.Metric[model.LabelName(label)])] = float64(s.Value)
	}
	return out, nil
}

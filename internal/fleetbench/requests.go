package fleetbench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// Requests is what one or more API servers counted in apiserver_request_total
// over an interval. Writes are what the issue asks for; dry-run requests are
// kept apart because they cost the API server nearly as much as a write
// (admission, conversion, validation) although they write nothing to etcd.
type Requests struct {
	// Writes are non-dry-run POST, PUT, PATCH, APPLY, DELETE and
	// DELETECOLLECTION requests, except the API servers' renewals of their
	// own leases.
	Writes float64 `json:"writes"`
	// WritesByResource splits Writes by resource[/subresource], e.g.
	// "manifests", "manifests/status", "events".
	WritesByResource map[string]float64 `json:"writesByResource,omitempty"`
	// DryRuns are write requests with dryRun=All.
	DryRuns float64 `json:"dryRuns"`
	// Reads are GET and LIST requests (watches are long-lived and not
	// counted).
	Reads float64 `json:"reads"`
	// ReadsByResource splits Reads by verb and resource[/subresource],
	// e.g. "GET kymas", "LIST configmaps": an idle fleet costs its runtimes
	// reads only, and these say which.
	ReadsByResource map[string]float64 `json:"readsByResource,omitempty"`
	// WriteBytes are the bodies of the writes (apiserver_request_body_size_bytes),
	// dry-runs included: the API server does not tell them apart there.
	WriteBytes float64 `json:"writeBytes"`
}

// writeVerbs are the verbs that change what etcd stores.
var writeVerbs = map[string]bool{
	"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true,
}

// parseRequests sums apiserver_request_total from an API server's /metrics.
func parseRequests(metrics []byte) (Requests, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(metrics))
	if err != nil {
		return Requests{}, fmt.Errorf("parsing API server metrics: %w", err)
	}
	r := Requests{WritesByResource: map[string]float64{}, ReadsByResource: map[string]float64{}}
	for _, m := range families["apiserver_request_body_size_bytes"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "verb" && writeVerbs[strings.ToUpper(l.GetValue())] {
				r.WriteBytes += m.GetHistogram().GetSampleSum()
			}
		}
	}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		value := m.GetCounter().GetValue()
		verb := labels["verb"]
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		switch {
		case labels["resource"] == "leases" && labels["group"] == "coordination.k8s.io":
			// Each API server renews its own identity lease every ten
			// seconds; the operator, without leader election, writes none.
		case writeVerbs[verb] && labels["dry_run"] != "":
			r.DryRuns += value
		case writeVerbs[verb]:
			r.Writes += value
			r.WritesByResource[key] += value
		case verb == "GET" || verb == "LIST":
			r.Reads += value
			r.ReadsByResource[verb+" "+key] += value
		}
	}
	return r, nil
}

// Sub is what was counted between before and r.
func (r Requests) Sub(before Requests) Requests {
	return Requests{
		Writes:           r.Writes - before.Writes,
		DryRuns:          r.DryRuns - before.DryRuns,
		Reads:            r.Reads - before.Reads,
		WriteBytes:       r.WriteBytes - before.WriteBytes,
		WritesByResource: subCounts(r.WritesByResource, before.WritesByResource),
		ReadsByResource:  subCounts(r.ReadsByResource, before.ReadsByResource),
	}
}

// subCounts is what was counted between before and now, by key; keys that
// did not change are left out.
func subCounts(now, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// addCounts is the sum of two counts by key.
func addCounts(a, b map[string]float64) map[string]float64 {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]float64{}
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// Add is the sum of two counts, for figures over several API servers.
func (r Requests) Add(other Requests) Requests {
	return Requests{
		Writes:           r.Writes + other.Writes,
		DryRuns:          r.DryRuns + other.DryRuns,
		Reads:            r.Reads + other.Reads,
		WriteBytes:       r.WriteBytes + other.WriteBytes,
		WritesByResource: addCounts(r.WritesByResource, other.WritesByResource),
		ReadsByResource:  addCounts(r.ReadsByResource, other.ReadsByResource),
	}
}

// requestCounter reads one API server's request counters. It uses the admin
// client of the API server, whose own requests (one GET of /metrics) count
// as reads only.
type requestCounter struct {
	host   string
	client *http.Client
}

func newRequestCounter(cfg *rest.Config) (*requestCounter, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating an HTTP client for %s: %w", cfg.Host, err)
	}
	return &requestCounter{host: cfg.Host, client: httpClient}, nil
}

func (c *requestCounter) read(ctx context.Context) (Requests, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+"/metrics", nil)
	if err != nil {
		return Requests{}, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return Requests{}, fmt.Errorf("reading metrics of %s: %w", c.host, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return Requests{}, fmt.Errorf("reading metrics of %s: %w", c.host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Requests{}, fmt.Errorf("reading metrics of %s: %s", c.host, resp.Status)
	}
	return parseRequests(buf.Bytes())
}

// CountRequests reads what the API server of cfg has counted so far, for
// tests that compare two moments (an operator's restart writes nothing).
func CountRequests(ctx context.Context, cfg *rest.Config) (Requests, error) {
	c, err := newRequestCounter(cfg)
	if err != nil {
		return Requests{}, err
	}
	return c.read(ctx)
}

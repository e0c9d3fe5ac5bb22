package testcluster

import (
	"bytes"
	"context"
	"fmt"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Requests sums the API server's own count of the requests it served
// (apiserver_request_total) whose labels (verb, resource, subresource, …)
// match: what a test asserts about the load a client puts on a cluster.
func (c *Cluster) Requests(ctx context.Context, match func(labels map[string]string) bool) (float64, error) {
	cs, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return 0, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading %s/metrics: %w", c.config.Host, err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("parsing %s/metrics: %w", c.config.Host, err)
	}
	total := 0.0
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if match(labels) {
			total += m.GetCounter().GetValue()
		}
	}
	return total, nil
}

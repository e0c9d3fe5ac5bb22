package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// RuntimePlaceholder in a query stands for each runtime's Kyma name: the
// query then runs once per runtime.
const RuntimePlaceholder = "{runtime}"

// noPrometheus is why prometheus analyses cannot run in an operator
// started without a Prometheus.
const noPrometheus = "no Prometheus to query: the operator was started without --analysis-prometheus-url"

// analysePrometheus runs a prometheus analysis for kymas into out: once
// per runtime when the query has {runtime}, else once for all of them,
// each sample belonging to the runtime its runtimeLabel names.
func (a *Analyzer) analysePrometheus(ctx context.Context, wg *sync.WaitGroup, name string, p *v1beta2.PrometheusAnalysis, kymas []string, out []verdict) {
	b, err := boundsOf(p)
	switch {
	case err != nil:
		fill(out, failed(name, "%s", err))
		return
	case a.prometheus == nil:
		fill(out, inconclusive(name, noPrometheus))
		return
	}
	if strings.Contains(p.Query, RuntimePlaceholder) {
		for i, k := range kymas {
			a.start(ctx, wg, func(ctx context.Context) {
				query, err := substitute(p.Query, k)
				if err != nil {
					out[i] = inconclusive(name, "%s", err)
					return
				}
				samples, err := a.query(ctx, query)
				if err != nil {
					out[i] = inconclusive(name, "%s", err)
					return
				}
				values := make([]float64, len(samples))
				for j, s := range samples {
					values[j] = float64(s.Value)
				}
				out[i] = b.judge(name, values)
			})
		}
		return
	}
	label := model.LabelName(p.RuntimeLabel)
	if label == "" {
		label = "runtime"
	}
	a.start(ctx, wg, func(ctx context.Context) {
		samples, err := a.query(ctx, p.Query)
		if err != nil {
			fill(out, inconclusive(name, "%s", err))
			return
		}
		byRuntime := map[string][]float64{}
		for _, s := range samples {
			if rt := string(s.Metric[label]); rt != "" {
				byRuntime[rt] = append(byRuntime[rt], float64(s.Value))
			}
		}
		for i, k := range kymas {
			out[i] = b.judge(name, byRuntime[k])
		}
	})
}

func fill(out []verdict, v verdict) {
	for i := range out {
		out[i] = v
	}
}

// substitute puts the Kyma's name in place of {runtime}. A Kyma's name is a
// DNS subdomain (lower-case letters, digits, '-' and '.'), which stands as
// it is inside a PromQL string ("…" or '…'); any other name is refused
// rather than escaped, so that no name can change what a query means.
func substitute(query, kymaName string) (string, error) {
	if errs := validation.IsDNS1123Subdomain(kymaName); len(errs) > 0 {
		return "", fmt.Errorf("runtime name %q cannot stand for %s: %s", kymaName, RuntimePlaceholder, strings.Join(errs, "; "))
	}
	return strings.ReplaceAll(query, RuntimePlaceholder, kymaName), nil
}

// query runs an instant query at Prometheus's present and returns its
// samples: a vector's, or a scalar as one sample without labels. While
// Prometheus is out (outage), it fails at once with the outage's error.
func (a *Analyzer) query(ctx context.Context, query string) ([]*model.Sample, error) {
	if err := a.outage.current(a.now()); err != nil {
		return nil, err
	}
	value, _, err := a.prometheus.Query(ctx, query, time.Time{}, promv1.WithTimeout(serverTimeout(a.timeout)))
	if err != nil {
		err = fmt.Errorf("query failed: %w", err)
		if unreachable(err) {
			a.outage.begin(a.now().Add(a.timeout), err)
		}
		return nil, err
	}
	switch v := value.(type) {
	case model.Vector:
		return v, nil
	case *model.Scalar:
		return []*model.Sample{{Value: v.Value, Timestamp: v.Timestamp}}, nil
	case nil:
		return nil, fmt.Errorf("the query returns nothing")
	default:
		return nil, fmt.Errorf("the query returns a %s; it must return an instant vector or a scalar", value.Type())
	}
}

// outage remembers that Prometheus could not be asked (unreachable, too
// slow, not answering as its API does), for one timeout: the queries of
// that time fail at once with the same error instead of each waiting for
// it. An unreachable Prometheus makes every analysis inconclusive anyway,
// and the wave holds whatever the other runtimes' queries would say; a
// blackholed one would otherwise hold the planner for a timeout per
// query, a wave of 500 runtimes ten minutes at the defaults.
type outage struct {
	mu    sync.Mutex
	until time.Time
	err   error
}

func (o *outage) current(now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now.Before(o.until) {
		return o.err
	}
	return nil
}

func (o *outage) begin(until time.Time, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.until, o.err = until, err
}

// unreachable tells a Prometheus that could not be asked from one that
// refused or could not evaluate a query (bad PromQL, an execution error or
// timeout of its own), which concerns that query alone.
func unreachable(err error) bool {
	var apiErr *promv1.Error
	if !errors.As(err, &apiErr) {
		return true // dial, TLS, the query's timeout here
	}
	switch apiErr.Type {
	case promv1.ErrServer, promv1.ErrClient, promv1.ErrBadResponse:
		// 5xx, 4xx (a proxy refusing our token), no API answer at all.
		return true
	}
	return false
}

// serverTimeout is the timeout Prometheus evaluates a query within (ctx
// bounds the wait here): whole seconds, or milliseconds under a second,
// since Prometheus does not parse Go's fractions ("1.5s").
func serverTimeout(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Truncate(time.Second)
	}
	return max(d.Truncate(time.Millisecond), time.Millisecond)
}

// bounds are a prometheus analysis's max and min, parsed.
type bounds struct {
	max, min       float64
	hasMax, hasMin bool
	maxText        string
	minText        string
}

func boundsOf(p *v1beta2.PrometheusAnalysis) (bounds, error) {
	b := bounds{maxText: p.Max, minText: p.Min}
	var err error
	if p.Max != "" {
		if b.max, err = strconv.ParseFloat(p.Max, 64); err != nil {
			return b, fmt.Errorf("max %q is not a number", p.Max)
		}
		b.hasMax = true
	}
	if p.Min != "" {
		if b.min, err = strconv.ParseFloat(p.Min, 64); err != nil {
			return b, fmt.Errorf("min %q is not a number", p.Min)
		}
		b.hasMin = true
	}
	if !b.hasMax && !b.hasMin {
		return b, fmt.Errorf("neither max nor min is set")
	}
	return b, nil
}

// judge compares a runtime's samples with the bounds: every one must be
// within them. No sample fails (a runtime that reports nothing is not
// known to be healthy); a NaN is inconclusive (a ratio over no requests).
// The message names the worst value and the bound it crossed.
func (b bounds) judge(name string, values []float64) verdict {
	if len(values) == 0 {
		return failed(name, "no sample")
	}
	highest, lowest := math.Inf(-1), math.Inf(1)
	for _, v := range values {
		if math.IsNaN(v) {
			return inconclusive(name, "the query returns NaN")
		}
		highest, lowest = max(highest, v), min(lowest, v)
	}
	switch {
	case b.hasMax && highest > b.max:
		return failed(name, "%s > max %s", formatValue(highest), b.maxText)
	case b.hasMin && lowest < b.min:
		return failed(name, "%s < min %s", formatValue(lowest), b.minText)
	}
	return verdict{}
}

// formatValue writes a sample's value short: whole numbers as they are,
// others with six significant digits.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

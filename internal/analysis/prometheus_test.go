package analysis

import (
	"context"
	"encoding/pem"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/rollout"
)

// A query with {runtime} runs once per runtime with its Kyma's name: a
// runtime within the bound passes, one above it fails with the value and
// the bound, one without a sample fails.
func TestAnalysisQueryPerRuntime(t *testing.T) {
	g := NewWithT(t)
	setGauges(g, "analysis_error_ratio", map[string]float64{"per-a": 0.01, "per-b": 0.21})
	a := newAnalyzer(g, Options{PrometheusURL: env.prometheus.URL()})

	got := a.Analyze(context.Background(), rolloutOf("shop", promAnalysis("error-rate", `analysis_error_ratio{runtime="{runtime}"}`, "0.05", "")), []string{"per-a", "per-b", "per-c"})
	g.Expect(got).To(Equal(map[string]rollout.AnalysisOutcome{
		"per-a": {},
		"per-b": {Failed: "error-rate: 0.21 > max 0.05"},
		"per-c": {Failed: "error-rate: no sample"},
	}))
}

// A query without {runtime} runs once, and each sample belongs to the
// runtime its runtimeLabel names: min and max both bound it, runtimes not
// asked about are ignored, one without a sample fails.
func TestAnalysisQueryMatchedByLabel(t *testing.T) {
	g := NewWithT(t)
	setGauges(g, "analysis_requests_per_second", map[string]float64{"lab-a": 12, "lab-b": 3, "lab-c": 5000, "lab-other": 1})
	a := newAnalyzer(g, Options{PrometheusURL: env.prometheus.URL()})

	an := promAnalysis("throughput", `label_replace(analysis_requests_per_second, "cluster", "$1", "runtime", "(.*)")`, "1000", "10")
	an.Prometheus.RuntimeLabel = "cluster"
	got := a.Analyze(context.Background(), rolloutOf("shop", an), []string{"lab-a", "lab-b", "lab-c", "lab-d"})
	g.Expect(got).To(Equal(map[string]rollout.AnalysisOutcome{
		"lab-a": {},
		"lab-b": {Failed: "throughput: 3 < min 10"},
		"lab-c": {Failed: "throughput: 5000 > max 1000"},
		"lab-d": {Failed: "throughput: no sample"},
	}))
}

// A NaN (a ratio over no requests) is inconclusive, never a pass.
func TestAnalysisNaNIsInconclusive(t *testing.T) {
	g := NewWithT(t)
	setGauges(g, "analysis_nan_ratio", map[string]float64{"nan-a": math.NaN()})
	a := newAnalyzer(g, Options{PrometheusURL: env.prometheus.URL()})

	got := a.Analyze(context.Background(), rolloutOf("shop", promAnalysis("ratio", `analysis_nan_ratio{runtime="{runtime}"}`, "0.05", "")), []string{"nan-a"})
	g.Expect(got).To(Equal(map[string]rollout.AnalysisOutcome{"nan-a": {Inconclusive: "ratio: the query returns NaN"}}))
}

// Whatever keeps a query from being answered makes the analysis
// inconclusive for every runtime, never passed.
func TestAnalysisQueryErrorsAreInconclusive(t *testing.T) {
	g := NewWithT(t)
	setGauges(g, "analysis_error_ratio", map[string]float64{"per-a": 0.01})

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	unreachable := "http://" + closed.Addr().String()
	g.Expect(closed.Close()).To(Succeed())

	// A Prometheus that never answers: the query's timeout ends the wait.
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(release) })

	cases := []struct {
		name  string
		opts  Options
		query string
		want  string
	}{
		{name: "unreachable", opts: Options{PrometheusURL: unreachable}, query: `analysis_error_ratio{runtime="{runtime}"}`, want: "error-rate: query failed: "},
		{name: "bad PromQL", opts: Options{PrometheusURL: env.prometheus.URL()}, query: `analysis_error_ratio{runtime="{runtime}"`, want: "error-rate: query failed: bad_data: "},
		{name: "range vector", opts: Options{PrometheusURL: env.prometheus.URL()}, query: `analysis_error_ratio{runtime="{runtime}"}[1m]`, want: "error-rate: the query returns a matrix; it must return an instant vector or a scalar"},
		{name: "label query unreachable", opts: Options{PrometheusURL: unreachable}, query: `analysis_error_ratio`, want: "error-rate: query failed: "},
		{name: "no answer within the timeout", opts: Options{PrometheusURL: silent.URL, Timeout: 300 * time.Millisecond}, query: `analysis_error_ratio`, want: "error-rate: query failed: "},
		{name: "no Prometheus", opts: Options{}, query: `analysis_error_ratio`, want: "error-rate: " + noPrometheus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := newAnalyzer(g, tc.opts)
			got := a.Analyze(context.Background(), rolloutOf("shop", promAnalysis("error-rate", tc.query, "0.05", "")), []string{"per-a", "per-b"})
			g.Expect(got).To(HaveLen(2))
			for k, outcome := range got {
				g.Expect(outcome.Failed).To(BeEmpty(), k)
				g.Expect(outcome.Inconclusive).To(HavePrefix(tc.want), k)
			}
		})
	}
}

// A Prometheus that cannot be asked is asked once per timeout, not once
// per runtime: the other queries fail at once with the same error. A query
// Prometheus refuses (bad PromQL) concerns that query alone.
func TestAnalysisOutageIsAskedOncePerTimeout(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	served := 0
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(down.Close)
	requests := func() int {
		mu.Lock()
		defer mu.Unlock()
		return served
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := newAnalyzer(g, Options{PrometheusURL: down.URL, Concurrency: 1, Timeout: 10 * time.Second})
	a.now = func() time.Time { return now }
	ro := rolloutOf("shop", promAnalysis("error-rate", `analysis_error_ratio{runtime="{runtime}"}`, "0.05", ""))
	kymas := []string{"out-a", "out-b", "out-c", "out-d"}
	outage := rollout.AnalysisOutcome{Inconclusive: "error-rate: query failed: server_error: server error: 502"}
	want := map[string]rollout.AnalysisOutcome{"out-a": outage, "out-b": outage, "out-c": outage, "out-d": outage}

	g.Expect(a.Analyze(context.Background(), ro, kymas)).To(Equal(want))
	g.Expect(requests()).To(Equal(1), "one query, the others short-cut")
	now = now.Add(9 * time.Second)
	g.Expect(a.Analyze(context.Background(), ro, kymas)).To(Equal(want))
	g.Expect(requests()).To(Equal(1), "within the timeout, not asked again")
	now = now.Add(time.Second)
	g.Expect(a.Analyze(context.Background(), ro, kymas)).To(Equal(want))
	g.Expect(requests()).To(Equal(2), "asked again after the timeout")

	// Bad PromQL is no outage: every runtime's query is asked.
	setGauges(g, "analysis_error_ratio", map[string]float64{"per-a": 0.01})
	real := newAnalyzer(g, Options{PrometheusURL: env.prometheus.URL(), Concurrency: 1})
	real.now = a.now
	bad := rolloutOf("shop", promAnalysis("error-rate", `analysis_error_ratio{runtime="{runtime}"`, "0.05", ""), promAnalysis("fine", `analysis_error_ratio{runtime="per-a"}`, "0.05", ""))
	got := real.Analyze(context.Background(), bad, []string{"per-a"})
	g.Expect(got["per-a"].Inconclusive).To(HavePrefix("error-rate: query failed: bad_data: "))
	g.Expect(got["per-a"].Inconclusive).NotTo(ContainSubstring("fine"), "the other analysis was asked and passed")
}

// Through an https endpoint that wants a bearer token (a proxy in front of
// the real Prometheus, as an SRE's Prometheus behind an authenticating
// proxy): the CA file verifies it, the token file is sent, and no more
// than Concurrency queries are in flight at once. A wrong token is
// refused, which is inconclusive.
func TestAnalysisTokenCAAndConcurrency(t *testing.T) {
	g := NewWithT(t)
	runtimes := []string{"auth-a", "auth-b", "auth-c", "auth-d", "auth-e", "auth-f", "auth-g", "auth-h"}
	values := map[string]float64{}
	for _, rt := range runtimes {
		values[rt] = 0.01
	}
	setGauges(g, "analysis_auth_ratio", values)

	target, err := url.Parse(env.prometheus.URL())
	g.Expect(err).NotTo(HaveOccurred())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	inFlight, most, served := 0, 0, 0
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		served++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	g.Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}), 0o600)).To(Succeed())
	tokenFile := filepath.Join(dir, "token")
	g.Expect(os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)).To(Succeed())

	a := newAnalyzer(g, Options{PrometheusURL: server.URL, CAFile: caFile, BearerTokenFile: tokenFile, Concurrency: 2})
	ro := rolloutOf("shop", promAnalysis("error-rate", `analysis_auth_ratio{runtime="{runtime}"}`, "0.05", ""))
	got := a.Analyze(context.Background(), ro, runtimes)
	g.Expect(got).To(HaveLen(len(runtimes)))
	for k, outcome := range got {
		g.Expect(outcome).To(Equal(rollout.AnalysisOutcome{}), k)
	}
	mu.Lock()
	g.Expect(served).To(Equal(len(runtimes)), "one query per runtime")
	g.Expect(most).To(BeNumerically("<=", 2), "at most Concurrency queries at once")
	mu.Unlock()

	wrongToken := filepath.Join(dir, "wrong-token")
	g.Expect(os.WriteFile(wrongToken, []byte("guess"), 0o600)).To(Succeed())
	refused := newAnalyzer(g, Options{PrometheusURL: server.URL, CAFile: caFile, BearerTokenFile: wrongToken})
	got = refused.Analyze(context.Background(), ro, runtimes[:1])
	g.Expect(got[runtimes[0]].Failed).To(BeEmpty())
	g.Expect(got[runtimes[0]].Inconclusive).To(HavePrefix("error-rate: query failed: "))
	g.Expect(got[runtimes[0]].Inconclusive).NotTo(ContainSubstring("guess"), "a token never shows in a message")

	// Without the CA, the server's certificate is not trusted.
	untrusted := newAnalyzer(g, Options{PrometheusURL: server.URL, BearerTokenFile: tokenFile})
	got = untrusted.Analyze(context.Background(), ro, runtimes[:1])
	g.Expect(got[runtimes[0]].Inconclusive).To(ContainSubstring("certificate"))
}

// Options that cannot work stop the operator at start, naming the flag
// and never a token.
func TestAnalysisNewRefusesOptionsThatCannotWork(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	NewWithT(t).Expect(os.WriteFile(token, []byte("s3cret"), 0o600)).To(Succeed())
	notPEM := filepath.Join(dir, "ca.crt")
	NewWithT(t).Expect(os.WriteFile(notPEM, []byte("not a certificate"), 0o600)).To(Succeed())

	cases := []struct {
		name string
		opts Options
		want string
	}{
		{name: "no scheme", opts: Options{PrometheusURL: "prometheus:9090"}, want: "is not an http(s) URL with a host"},
		{name: "password redacted", opts: Options{PrometheusURL: "ftp://user:pw@prometheus:9090"}, want: `"ftp://user:xxxxx@prometheus:9090" is not an http(s) URL`},
		{name: "token over http", opts: Options{PrometheusURL: "http://prometheus:9090", BearerTokenFile: token}, want: "needs an https --analysis-prometheus-url"},
		{name: "missing token file", opts: Options{PrometheusURL: "https://prometheus:9090", BearerTokenFile: filepath.Join(dir, "absent")}, want: "--analysis-prometheus-bearer-token-file"},
		{name: "CA over http", opts: Options{PrometheusURL: "http://prometheus:9090", CAFile: notPEM}, want: "--analysis-prometheus-ca-file needs an https"},
		{name: "CA without a certificate", opts: Options{PrometheusURL: "https://prometheus:9090", CAFile: notPEM}, want: "holds no PEM certificate"},
		{name: "negative timeout", opts: Options{Timeout: -time.Second}, want: "cannot be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := New(tc.opts, Fleet{Manifests: env.client, Runtimes: env.runtimes})
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
			g.Expect(err.Error()).NotTo(ContainSubstring(":pw@"))
		})
	}
}

func TestAnalysisJudge(t *testing.T) {
	both := bounds{max: 0.05, min: 0.01, hasMax: true, hasMin: true, maxText: "0.05", minText: "0.01"}
	cases := []struct {
		name   string
		b      bounds
		values []float64
		want   verdict
	}{
		{name: "within", b: both, values: []float64{0.02}},
		{name: "at max passes", b: both, values: []float64{0.05}},
		{name: "at min passes", b: both, values: []float64{0.01}},
		{name: "above max", b: both, values: []float64{0.21}, want: verdict{failed: "a: 0.21 > max 0.05"}},
		{name: "below min", b: both, values: []float64{0.001}, want: verdict{failed: "a: 0.001 < min 0.01"}},
		{name: "the worst sample names the failure", b: both, values: []float64{0.02, 0.3, 0.2}, want: verdict{failed: "a: 0.3 > max 0.05"}},
		{name: "no sample", b: both, want: verdict{failed: "a: no sample"}},
		{name: "NaN among samples", b: both, values: []float64{0.02, math.NaN()}, want: verdict{inconclusive: "a: the query returns NaN"}},
		{name: "+Inf above max", b: both, values: []float64{math.Inf(1)}, want: verdict{failed: "a: +Inf > max 0.05"}},
		{name: "max only ignores low values", b: bounds{max: 1, hasMax: true, maxText: "1"}, values: []float64{-5}},
		{name: "min only ignores high values", b: bounds{min: 1, hasMin: true, minText: "1"}, values: []float64{1e9}},
		{name: "long values shortened", b: bounds{max: 0.1, hasMax: true, maxText: "0.1"}, values: []float64{0.123456789}, want: verdict{failed: "a: 0.123457 > max 0.1"}},
		{name: "whole numbers as they are", b: bounds{max: 100, hasMax: true, maxText: "100"}, values: []float64{1234567}, want: verdict{failed: "a: 1234567 > max 100"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.b.judge("a", tc.values)).To(Equal(tc.want))
		})
	}
}

func TestAnalysisBoundsOf(t *testing.T) {
	g := NewWithT(t)
	b, err := boundsOf(&v1beta2.PrometheusAnalysis{Max: "0.05", Min: "-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(Equal(bounds{max: 0.05, min: -1, hasMax: true, hasMin: true, maxText: "0.05", minText: "-1"}))
	_, err = boundsOf(&v1beta2.PrometheusAnalysis{})
	g.Expect(err).To(MatchError("neither max nor min is set"))
	_, err = boundsOf(&v1beta2.PrometheusAnalysis{Max: "lots"})
	g.Expect(err).To(MatchError(`max "lots" is not a number`))
}

// {runtime} takes a Kyma's name as it is; a name that is not a DNS
// subdomain, which could change what the query means, is refused.
func TestAnalysisSubstitute(t *testing.T) {
	cases := []struct {
		name, kyma, want, err string
	}{
		{name: "DNS label", kyma: "kyma-03", want: `up{runtime="kyma-03"} + up{cluster="kyma-03"}`},
		{name: "DNS subdomain", kyma: "eu.kyma-03", want: `up{runtime="eu.kyma-03"} + up{cluster="eu.kyma-03"}`},
		{name: "a quote", kyma: `x"} or vector(0) or {a="`, err: "cannot stand for {runtime}"},
		{name: "upper case", kyma: "Kyma", err: "cannot stand for {runtime}"},
		{name: "empty", kyma: "", err: "cannot stand for {runtime}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := substitute(`up{runtime="{runtime}"} + up{cluster="{runtime}"}`, tc.kyma)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// One runtime's outcome joins its analyses' verdicts and stays short.
func TestAnalysisBounded(t *testing.T) {
	g := NewWithT(t)
	g.Expect(bounded([]string{"a: 1 > max 0", "b: no sample"})).To(Equal("a: 1 > max 0; b: no sample"))
	long := bounded([]string{strings.Repeat("é", maxMessage)})
	g.Expect(len(long)).To(BeNumerically("<=", maxMessage))
	g.Expect(long).To(HaveSuffix("…"))
	g.Expect(strings.ToValidUTF8(long, "?")).To(Equal(long), "cut between characters")
}

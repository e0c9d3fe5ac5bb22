package listener_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

var (
	kymaA = types.NamespacedName{Namespace: "kcp-system", Name: "kyma-a"}
	kymaB = types.NamespacedName{Namespace: "kcp-system", Name: "kyma-b"}
)

// manifestA is kyma-a's Manifest of the module "sample".
var manifestA = types.NamespacedName{Namespace: "kcp-system", Name: "kyma-a-sample"}

type fleet map[string][]types.NamespacedName

func (f fleet) KymasOf(_ context.Context, id string) ([]types.NamespacedName, error) {
	return f[id], nil
}

// modules finds Manifests by "<kyma>/<module>"; the module "lookup-fails"
// fails.
type modules map[string]types.NamespacedName

func (m modules) ManifestOf(_ context.Context, kyma types.NamespacedName, module string) (types.NamespacedName, bool, error) {
	if module == "lookup-fails" {
		return types.NamespacedName{}, false, errors.New("cache not synced")
	}
	manifest, ok := m[kyma.Name+"/"+module]
	return manifest, ok, nil
}

type env struct {
	addr      string
	ca        *pki.CA
	health    *listener.Health
	requeue   chan event.TypedGenericEvent[*v1beta2.Kyma]
	manifests chan event.TypedGenericEvent[*v1beta2.Manifest]
}

// start runs a listener on loopback; change adjusts its options.
func start(t *testing.T, change ...func(*listener.Options)) *env {
	t.Helper()
	g := NewWithT(t)
	ca, err := pki.NewCA("test", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	e := &env{addr: ln.Addr().String(), ca: ca, health: listener.NewHealth(time.Minute),
		requeue:   make(chan event.TypedGenericEvent[*v1beta2.Kyma], 16),
		manifests: make(chan event.TypedGenericEvent[*v1beta2.Manifest], 16)}
	_ = ln.Close()
	opts := listener.Options{
		Address:         e.addr,
		ClientCAs:       ca.Pool(),
		GetCertificate:  pki.NewServingCertificate(ca, pki.Request{CommonName: "listener", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour}, 0).GetCertificate,
		Kymas:           fleet{"runtime-a": {kymaA}, "runtime-b": {kymaB}},
		Requeue:         e.requeue,
		Manifests:       modules{"kyma-a/sample": manifestA},
		ManifestRequeue: e.manifests,
		Health:          e.health,
		MaxBodyBytes:    4096,
	}
	for _, c := range change {
		c(&opts)
	}
	l, err := listener.New(opts)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	})
	g.Eventually(func() error {
		c, err := net.Dial("tcp", e.addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}, 5*time.Second, 10*time.Millisecond).Should(Succeed())
	return e
}

// client reports as runtimeID with a certificate from ca, trusting e's CA.
func (e *env) client(t *testing.T, ca *pki.CA, runtimeID string, version uint16) *http.Client {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: version, RootCAs: e.ca.Pool()}
	if ca != nil {
		kp, err := ca.Issue(pki.Request{CommonName: runtimeID, Usage: pki.ClientAuth, Validity: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func (e *env) post(c *http.Client, method, path string, body []byte) (int, string, error) {
	req, err := http.NewRequest(method, "https://"+e.addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(msg)), nil
}

func body(kyma string) []byte {
	b, _ := json.Marshal(report.Report{ID: "r1", Kyma: kyma, Operation: "UPDATE", ChangedAt: time.Now(),
		Object: report.ObjectRef{Group: "operator.kyma-project.io", Version: "v1beta2", Kind: "Kyma", Namespace: "kyma-system", Name: "default"}})
	return b
}

// moduleBody reports a change of a module's resource.
func moduleBody(kyma, module string) []byte {
	b, _ := json.Marshal(report.Report{ID: "r2", Kyma: kyma, Module: module, Operation: "UPDATE", ChangedAt: time.Now(),
		Object: report.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "kyma-system", Name: "sample-config"}})
	return b
}

// drain returns what the listener requeued.
func (e *env) drain() (kymas, manifests []types.NamespacedName) {
	for len(e.requeue) > 0 {
		ev := <-e.requeue
		kymas = append(kymas, types.NamespacedName{Namespace: ev.Object.Namespace, Name: ev.Object.Name})
	}
	for len(e.manifests) > 0 {
		ev := <-e.manifests
		manifests = append(manifests, types.NamespacedName{Namespace: ev.Object.Namespace, Name: ev.Object.Name})
	}
	return kymas, manifests
}

func value(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		pb := &dto.Metric{}
		if m.Write(pb) == nil {
			sum += pb.GetCounter().GetValue()
		}
	}
	return sum
}

func TestListenerAcceptsOnlyItsRuntimesReports(t *testing.T) {
	e := start(t)
	a := e.client(t, e.ca, "runtime-a", tls.VersionTLS13)
	tests := []struct {
		name      string
		client    *http.Client
		method    string
		path      string
		body      []byte
		code      int
		reason    string
		requeue   []types.NamespacedName
		manifests []types.NamespacedName
	}{
		{name: "own Kyma", client: a, body: body("kyma-a"), code: http.StatusAccepted, requeue: []types.NamespacedName{kymaA}},
		{name: "no Kyma named: all of the runtime's", client: a, body: body(""), code: http.StatusAccepted, requeue: []types.NamespacedName{kymaA}},
		{name: "module resource: its Manifest, not the Kyma", client: a, body: moduleBody("kyma-a", "sample"), code: http.StatusAccepted,
			manifests: []types.NamespacedName{manifestA}},
		{name: "module resource of a module without Manifest", client: a, body: moduleBody("kyma-a", "other"), code: http.StatusAccepted,
			requeue: []types.NamespacedName{kymaA}},
		{name: "module resource without a Kyma named: no Manifest", client: a, body: moduleBody("", "sample"), code: http.StatusAccepted,
			requeue: []types.NamespacedName{kymaA}},
		{name: "module resource of another runtime's Kyma", client: a, body: moduleBody("kyma-b", "sample"), code: http.StatusForbidden,
			reason: listener.ReasonRuntimeMismatch},
		{name: "Manifest lookup fails: the agent retries", client: a, body: moduleBody("kyma-a", "lookup-fails"), code: http.StatusServiceUnavailable,
			reason: listener.ReasonLookup},
		{name: "another runtime's Kyma", client: a, body: body("kyma-b"), code: http.StatusForbidden, reason: listener.ReasonRuntimeMismatch},
		{name: "a runtime no Kyma has", client: e.client(t, e.ca, "runtime-x", tls.VersionTLS13), body: body("kyma-a"), code: http.StatusForbidden, reason: listener.ReasonUnknownRuntime},
		{name: "a certificate without runtime id", client: e.client(t, e.ca, " ", tls.VersionTLS13), body: body("kyma-a"), code: http.StatusForbidden, reason: listener.ReasonUnknownRuntime},
		{name: "over the size limit", client: a, body: append(body("kyma-a"), bytes.Repeat([]byte(" "), 5000)...), code: http.StatusRequestEntityTooLarge, reason: listener.ReasonTooLarge},
		{name: "not JSON", client: a, body: []byte("{"), code: http.StatusBadRequest, reason: listener.ReasonMalformed},
		{name: "no object", client: a, body: []byte(`{"operation":"UPDATE"}`), code: http.StatusBadRequest, reason: listener.ReasonMalformed},
		{name: "GET", client: a, method: http.MethodGet, code: http.StatusMethodNotAllowed},
		{name: "heartbeat", client: a, path: report.HeartbeatPath, code: http.StatusNoContent},
		{name: "heartbeat of an unknown runtime", client: e.client(t, e.ca, "runtime-x", tls.VersionTLS13), path: report.HeartbeatPath, code: http.StatusForbidden, reason: listener.ReasonUnknownRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			method, path := tt.method, tt.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = report.ReportPath
			}
			var before float64
			if tt.reason != "" {
				before = value(metrics.ListenerRejected.WithLabelValues(tt.reason))
			}
			code, msg, err := e.post(tt.client, method, path, tt.body)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(tt.code), msg)
			if tt.reason != "" {
				g.Expect(value(metrics.ListenerRejected.WithLabelValues(tt.reason))).To(Equal(before + 1))
			}
			kymas, manifests := e.drain()
			g.Expect(kymas).To(Equal(tt.requeue))
			g.Expect(manifests).To(Equal(tt.manifests))
		})
	}
	// Both accepted reports and the heartbeat count as contact.
	if e.health.Silent("runtime-a", time.Now().Add(59*time.Second)) {
		t.Fatal("runtime-a is silent although it just reported")
	}
}

func TestListenerRefusesUntrustedConnections(t *testing.T) {
	e := start(t)
	other, err := pki.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		client *http.Client
	}{
		{name: "certificate of another CA", client: e.client(t, other, "runtime-a", tls.VersionTLS13)},
		{name: "no client certificate", client: e.client(t, nil, "", tls.VersionTLS13)},
		{name: "TLS 1.2", client: e.client(t, e.ca, "runtime-a", tls.VersionTLS12)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before := value(metrics.ListenerRejected.WithLabelValues(listener.ReasonTLSHandshake))
			_, _, err := e.post(tt.client, http.MethodPost, report.ReportPath, body("kyma-a"))
			g.Expect(err).To(HaveOccurred())
			g.Eventually(func() float64 { return value(metrics.ListenerRejected.WithLabelValues(listener.ReasonTLSHandshake)) }, 5*time.Second, 10*time.Millisecond).
				Should(BeNumerically(">", before))
			g.Expect(e.requeue).To(BeEmpty())
		})
	}
}

func TestListenerAnswersBusyWhenTheQueueDoesNotTake(t *testing.T) {
	g := NewWithT(t)
	e := start(t)
	a := e.client(t, e.ca, "runtime-a", tls.VersionTLS13)
	// Fill the requeue channel; nobody drains it.
	for range cap(e.requeue) {
		e.requeue <- event.TypedGenericEvent[*v1beta2.Kyma]{Object: &v1beta2.Kyma{}}
	}
	before := value(metrics.ListenerRejected.WithLabelValues(listener.ReasonBusy))
	code, _, err := e.post(a, http.MethodPost, report.ReportPath, body("kyma-a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusServiceUnavailable), "the agent must retry")
	g.Expect(value(metrics.ListenerRejected.WithLabelValues(listener.ReasonBusy))).To(Equal(before + 1))
}

// A reported Kyma is requeued at once and once more after the recheck
// delay, which catches a change the runtime stored only after the first
// reconcile read it; reports in between share one recheck.
func TestListenerRechecksOncePerPeriod(t *testing.T) {
	g := NewWithT(t)
	e := start(t, func(o *listener.Options) { o.RecheckAfter = 300 * time.Millisecond })
	a := e.client(t, e.ca, "runtime-a", tls.VersionTLS13)
	rechecks := value(metrics.ListenerRechecks)
	for range 3 {
		code, msg, err := e.post(a, http.MethodPost, report.ReportPath, body("kyma-a"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusAccepted), msg)
	}
	g.Expect(e.requeue).To(HaveLen(3), "each report requeues at once")
	for range 3 {
		<-e.requeue
	}
	g.Eventually(e.requeue, 2*time.Second, 10*time.Millisecond).Should(Receive(HaveField("Object.Name", "kyma-a")))
	g.Consistently(e.requeue, 600*time.Millisecond, 10*time.Millisecond).ShouldNot(Receive())
	g.Expect(value(metrics.ListenerRechecks)).To(Equal(rechecks + 1))

	// A module resource's Manifest is rechecked as well, once.
	for range 2 {
		code, msg, err := e.post(a, http.MethodPost, report.ReportPath, moduleBody("kyma-a", "sample"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusAccepted), msg)
	}
	kymas, manifests := e.drain()
	g.Expect(kymas).To(BeEmpty())
	g.Expect(manifests).To(Equal([]types.NamespacedName{manifestA, manifestA}))
	g.Eventually(e.manifests, 2*time.Second, 10*time.Millisecond).Should(Receive(HaveField("Object.Name", manifestA.Name)))
	g.Consistently(e.manifests, 600*time.Millisecond, 10*time.Millisecond).ShouldNot(Receive())
	g.Expect(e.requeue).To(BeEmpty())
	g.Expect(value(metrics.ListenerRechecks)).To(Equal(rechecks + 2))
}

// A Manifest is found by the Kyma controller's name for it, and only if it
// carries the Kyma's and the module's labels: Kyma "a" with module "b-c" and
// Kyma "a-b" with module "c" share a name, and one runtime's report must not
// requeue another's Manifest.
func TestCacheManifestLookup(t *testing.T) {
	ctx := context.Background()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcp-system"}}); err != nil {
		t.Fatal(err)
	}
	manifest := func(name, kyma, module string) *v1beta2.Manifest {
		return &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: name,
			Labels: map[string]string{v1beta2.KymaNameLabel: kyma, v1beta2.ModuleNameLabel: module}},
			Spec: v1beta2.ManifestSpec{Remote: true}}
	}
	for _, m := range []*v1beta2.Manifest{manifest("a-b-c", "a-b", "c"), manifest("a-sample", "a", "sample")} {
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	lookup := listener.CacheManifestLookup{Reader: c, Name: func(kyma, module string) string { return kyma + "-" + module }}
	tests := []struct {
		name         string
		kyma, module string
		want         bool
	}{
		{name: "the Kyma's Manifest of the module", kyma: "a", module: "sample", want: true},
		{name: "the owner of the name itself", kyma: "a-b", module: "c", want: true},
		{name: "the same name, another Kyma's", kyma: "a", module: "b-c", want: false},
		{name: "no such Manifest", kyma: "a", module: "missing", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok, err := lookup.ManifestOf(context.Background(), types.NamespacedName{Namespace: "kcp-system", Name: tt.kyma}, tt.module)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(Equal(tt.want))
			if ok {
				g.Expect(got).To(Equal(types.NamespacedName{Namespace: "kcp-system", Name: tt.kyma + "-" + tt.module}))
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	both := []types.NamespacedName{kymaA, kymaB}
	tests := []struct {
		name   string
		kyma   string
		kymas  []types.NamespacedName
		want   []types.NamespacedName
		reason string
	}{
		{name: "named own Kyma", kyma: "kyma-a", kymas: both, want: []types.NamespacedName{kymaA}},
		{name: "no name: all", kyma: "", kymas: both, want: both},
		{name: "foreign Kyma", kyma: "kyma-c", kymas: both, reason: listener.ReasonRuntimeMismatch},
		{name: "no Kyma for the runtime", kyma: "kyma-a", kymas: nil, reason: listener.ReasonUnknownRuntime},
		{name: "no Kyma, none named", kyma: "", kymas: nil, reason: listener.ReasonUnknownRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := listener.Authorize(&report.Report{Kyma: tt.kyma}, tt.kymas)
			if reason != tt.reason {
				t.Fatalf("reason %q, want %q", reason, tt.reason)
			}
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
}

func TestHealthSilence(t *testing.T) {
	h := listener.NewHealth(10 * time.Second)
	now := time.Now()
	if h.Silent("never-seen", now) {
		t.Fatal("a runtime is silent before the grace period after start is over")
	}
	if !h.Silent("never-seen", now.Add(11*time.Second)) {
		t.Fatal("a runtime never heard from is not silent after the timeout")
	}
	h.Seen("a", now.Add(5*time.Second))
	h.Seen("a", now.Add(time.Second)) // older contact does not move it back
	if h.Silent("a", now.Add(14*time.Second)) {
		t.Fatal("a runtime heard from 9s ago is silent")
	}
	if !h.Silent("a", now.Add(16*time.Second)) {
		t.Fatal("a runtime heard from 11s ago is not silent")
	}
	var nilHealth *listener.Health
	nilHealth.Seen("a", now) // a listener without health tracking must not panic
}

// A runtime that floods the listener with its valid client certificate is
// answered 429 with Retry-After once its bucket is empty, before its body is
// read or its Kymas looked up; another runtime's reports, sent during the
// flood, are all accepted and requeue its Kyma.
func TestListenerRateLimitsEachRuntimeOnItsOwn(t *testing.T) {
	g := NewWithT(t)
	const rate, burst = 1.0, 5
	e := start(t, func(o *listener.Options) { o.ReportRate, o.ReportBurst = rate, burst })
	requeued := map[string]int{}
	var mu sync.Mutex
	stopDrain := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			select {
			case ev := <-e.requeue:
				mu.Lock()
				requeued[ev.Object.Name]++
				mu.Unlock()
			case <-stopDrain:
				return
			}
		}
	}()
	defer func() { close(stopDrain); <-drained }()
	requeuedOf := func(kyma string) int {
		mu.Lock()
		defer mu.Unlock()
		return requeued[kyma]
	}

	// runtime-a floods: 20 connections, 300 reports.
	flooder := e.client(t, e.ca, "runtime-a", tls.VersionTLS13)
	flooder.Transport.(*http.Transport).MaxIdleConnsPerHost = 20
	limitedBefore := value(metrics.ListenerRejected.WithLabelValues(listener.ReasonRateLimited))
	var accepted, limited, other atomic.Int64
	var badRetryAfter atomic.Value
	firstLimited := make(chan struct{})
	var once sync.Once
	work := make(chan struct{}, 300)
	for range cap(work) {
		work <- struct{}{}
	}
	close(work)
	start := time.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range work {
				resp, err := flooder.Post("https://"+e.addr+report.ReportPath, "application/json", bytes.NewReader(body("kyma-a")))
				if err != nil {
					other.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusAccepted:
					accepted.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
						badRetryAfter.Store(resp.Header.Get("Retry-After"))
					}
					once.Do(func() { close(firstLimited) })
				default:
					other.Add(1)
				}
			}
		})
	}

	floodDone := make(chan struct{})
	go func() { wg.Wait(); close(floodDone) }()

	// While runtime-a is being refused, runtime-b reports.
	b := e.client(t, e.ca, "runtime-b", tls.VersionTLS13)
	select {
	case <-firstLimited:
	case <-floodDone:
		t.Fatal("the flooding runtime was never answered 429")
	}
	for i := range burst {
		code, msg, err := e.post(b, http.MethodPost, report.ReportPath, body("kyma-b"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusAccepted), "report %d of runtime-b during the flood: %s", i, msg)
	}
	g.Eventually(func() int { return requeuedOf("kyma-b") }, 5*time.Second, 10*time.Millisecond).Should(Equal(burst),
		"each of runtime-b's reports requeues its Kyma")
	<-floodDone
	elapsed := time.Since(start)

	g.Expect(other.Load()).To(BeZero(), "flood requests failed otherwise than with 202 or 429")
	g.Expect(badRetryAfter.Load()).To(BeNil(), "a 429 without a Retry-After of whole seconds")
	g.Expect(limited.Load()).To(BeNumerically(">", 0))
	g.Expect(accepted.Load() + limited.Load()).To(Equal(int64(300)))
	// The bucket's promise: no more than the burst plus the refill.
	g.Expect(accepted.Load()).To(BeNumerically("<=", burst+int64(elapsed.Seconds()*rate)+1))
	g.Expect(value(metrics.ListenerRejected.WithLabelValues(listener.ReasonRateLimited))).To(Equal(limitedBefore + float64(limited.Load())))
	g.Eventually(func() int { return requeuedOf("kyma-a") }, 5*time.Second, 10*time.Millisecond).Should(Equal(int(accepted.Load())),
		"a refused report requeued a Kyma")
}

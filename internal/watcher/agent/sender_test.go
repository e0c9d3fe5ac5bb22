package agent

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// kymasByRuntime is the listener's view of the fleet in these tests.
type kymasByRuntime map[string][]types.NamespacedName

func (k kymasByRuntime) KymasOf(_ context.Context, id string) ([]types.NamespacedName, error) {
	return k[id], nil
}

// testListener runs the real listener on loopback and counts the Kymas it
// requeues.
type testListener struct {
	url      string
	ca       *pki.CA
	requeued atomic.Int64
}

func startListener(t *testing.T, change ...func(*listener.Options)) *testListener {
	t.Helper()
	ca, err := pki.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	requeue := make(chan event.TypedGenericEvent[*v1beta2.Kyma])
	opts := listener.Options{
		Address:        addr,
		ClientCAs:      ca.Pool(),
		GetCertificate: pki.NewServingCertificate(ca, pki.Request{CommonName: "listener", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour}, 0).GetCertificate,
		Kymas:          kymasByRuntime{"runtime-a": {{Namespace: "kcp-system", Name: "kyma-a"}}, "runtime-b": {{Namespace: "kcp-system", Name: "kyma-b"}}},
		Requeue:        requeue,
	}
	for _, c := range change {
		c(&opts)
	}
	l, err := listener.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tl := &testListener{url: "https://" + addr, ca: ca}
	go func() { _ = l.Start(ctx) }()
	go func() {
		for {
			select {
			case <-requeue:
				tl.requeued.Add(1)
			case <-ctx.Done():
				return
			}
		}
	}()
	NewWithT(t).Eventually(func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}, 5*time.Second, 10*time.Millisecond).Should(Succeed())
	return tl
}

// newTestSender returns a running sender with runtime-a's certificate.
func newTestSender(t *testing.T, l *testListener, change func(*Options)) (*sender, *metrics.Agent) {
	t.Helper()
	opts := DefaultOptions()
	opts.ListenerURL = l.url
	opts.CoalesceWindow = 50 * time.Millisecond
	opts.BaseBackoff, opts.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	opts.MaxAttempts = 3
	opts.RequestTimeout = 2 * time.Second
	if change != nil {
		change(&opts)
	}
	kp, err := l.ca.Issue(pki.Request{CommonName: "runtime-a", Usage: pki.ClientAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewAgent()
	creds := newCredentials(opts, m, logr.Discard())
	state, err := newClientState(kp.CertPEM, kp.KeyPEM, l.ca.CertPEM(), opts)
	if err != nil {
		t.Fatal(err)
	}
	creds.client.Store(state)
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	s := newSender(opts, creds, m, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, m
}

func testReport(name, kyma string) *report.Report {
	return &report.Report{ID: name, Kyma: kyma, Operation: "UPDATE", ChangedAt: time.Now(),
		Object: report.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "default", Name: name}}
}

func value(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		pb := &dto.Metric{}
		if m.Write(pb) == nil {
			sum += pb.GetCounter().GetValue() + pb.GetGauge().GetValue()
		}
	}
	return sum
}

func TestSenderCoalescesReportsOfOneObject(t *testing.T) {
	g := NewWithT(t)
	l := startListener(t)
	s, m := newTestSender(t, l, func(o *Options) { o.CoalesceWindow = 300 * time.Millisecond })
	for range 5 {
		s.enqueue(testReport("same", "kyma-a"))
	}
	s.enqueue(testReport("other", "kyma-a"))
	g.Eventually(func() float64 { return value(m.ReportsSent) }, 5*time.Second, 10*time.Millisecond).Should(Equal(2.0))
	g.Consistently(func() float64 { return value(m.ReportsSent) }, 500*time.Millisecond, 10*time.Millisecond).Should(Equal(2.0))
	g.Expect(value(m.ReportsCoalesced)).To(Equal(4.0))
	g.Expect(l.requeued.Load()).To(Equal(int64(2)))
}

func TestSenderRetriesWithinBoundsThenDrops(t *testing.T) {
	g := NewWithT(t)
	l := startListener(t)
	// Nothing listens on this port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	closed := "https://" + ln.Addr().String()
	_ = ln.Close()
	s, m := newTestSender(t, l, func(o *Options) { o.ListenerURL = closed })
	s.enqueue(testReport("lost", "kyma-a"))
	g.Eventually(func() float64 { return value(m.ReportFailures.WithLabelValues(ReasonRetriesExhausted)) }, 5*time.Second, 10*time.Millisecond).Should(Equal(1.0))
	g.Expect(value(m.ReportFailures.WithLabelValues(ReasonUnreachable))).To(Equal(3.0), "one failure per attempt")
	g.Expect(value(m.ReportRetries)).To(Equal(2.0))
	g.Expect(value(m.Pending)).To(BeZero())
}

func TestSenderDoesNotRetryARefusal(t *testing.T) {
	g := NewWithT(t)
	l := startListener(t)
	s, m := newTestSender(t, l, nil)
	s.enqueue(testReport("for-b", "kyma-b"))
	g.Eventually(func() float64 { return value(m.ReportFailures.WithLabelValues(ReasonRejected)) }, 5*time.Second, 10*time.Millisecond).Should(Equal(1.0))
	g.Consistently(func() float64 { return value(m.ReportRetries) }, 300*time.Millisecond, 10*time.Millisecond).Should(BeZero())
	g.Expect(l.requeued.Load()).To(BeZero())
}

func TestSenderBoundsSizeAndQueue(t *testing.T) {
	g := NewWithT(t)
	l := startListener(t)
	s, m := newTestSender(t, l, func(o *Options) {
		o.MaxReportBytes = 400
		o.MaxPending = 2
		o.CoalesceWindow = 200 * time.Millisecond
	})
	// The name is in the report twice (id, object): over the limit.
	s.enqueue(testReport(strings.Repeat("a", 200), "kyma-a"))
	s.enqueue(testReport("b", "kyma-a"))
	s.enqueue(testReport("c", "kyma-a"))
	g.Expect(value(m.ReportFailures.WithLabelValues(ReasonQueueFull))).To(Equal(1.0))
	g.Eventually(func() float64 { return value(m.ReportFailures.WithLabelValues(ReasonTooLarge)) }, 5*time.Second, 10*time.Millisecond).Should(Equal(1.0))
	g.Eventually(func() float64 { return value(m.ReportsSent) }, 5*time.Second, 10*time.Millisecond).Should(Equal(1.0))
}

func TestHeartbeatIsRecordedByTheListener(t *testing.T) {
	g := NewWithT(t)
	l := startListener(t)
	s, m := newTestSender(t, l, nil)
	s.heartbeat(context.Background())
	g.Expect(value(m.Heartbeats.WithLabelValues("ok"))).To(Equal(1.0))
	// The client refuses a listener whose certificate the CA did not issue.
	other := startListener(t)
	s2, m2 := newTestSender(t, l, func(o *Options) { o.ListenerURL = other.url })
	s2.heartbeat(context.Background())
	g.Expect(value(m2.Heartbeats.WithLabelValues("failed"))).To(Equal(1.0))
}

// acceptedIDs collects the ids of the reports the listener accepted, from
// the sender's log.
type acceptedIDs struct {
	mu  sync.Mutex
	ids []string
}

func (a *acceptedIDs) logger() logr.Logger {
	return funcr.New(func(_, args string) {
		if strings.Contains(args, `"msg"="Report accepted"`) {
			if _, rest, ok := strings.Cut(args, `"id"="`); ok {
				id, _, _ := strings.Cut(rest, `"`)
				a.mu.Lock()
				a.ids = append(a.ids, id)
				a.mu.Unlock()
			}
		}
	}, funcr.Options{Verbosity: 1})
}

func (a *acceptedIDs) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ids)
}

// A runtime over its rate limit is answered 429: the agent waits as long as
// Retry-After says, without using up an attempt (one attempt only here, so
// the old handling dropped the report), and a change arriving meanwhile
// replaces the waiting report, so the latest change of each object is what
// arrives.
func TestSenderWaitsOutTheRateLimitAndKeepsTheLatestChange(t *testing.T) {
	g := NewWithT(t)
	l := startListener(t, func(o *listener.Options) { o.ReportRate, o.ReportBurst = 1, 1 })
	accepted := &acceptedIDs{}
	s, m := newTestSender(t, l, func(o *Options) {
		o.MaxAttempts = 1
		o.Logger = accepted.logger()
	})
	objects := []string{"x", "y", "z"}
	for _, name := range objects {
		s.enqueue(testReport(name, "kyma-a"))
	}
	g.Eventually(func() float64 { return value(m.ReportFailures.WithLabelValues(ReasonThrottled)) }, 10*time.Second, 10*time.Millisecond).
		Should(BeNumerically(">=", 1), "three reports at once over a bucket of one")
	coalesced := value(m.ReportsCoalesced)
	for _, name := range objects {
		latest := testReport(name, "kyma-a")
		latest.ID = name + "-latest"
		s.enqueue(latest)
	}
	g.Expect(value(m.ReportsCoalesced)).To(BeNumerically(">", coalesced), "a newer change did not replace a throttled report")

	g.Eventually(accepted.list, 30*time.Second, 50*time.Millisecond).Should(ContainElements("x-latest", "y-latest", "z-latest"))
	g.Expect(value(m.ReportFailures.WithLabelValues(ReasonRetriesExhausted))).To(BeZero())
	g.Expect(value(m.ReportFailures.WithLabelValues(ReasonRejected))).To(BeZero())
	g.Expect(value(m.Pending)).To(BeZero())
	// An older report of an object went, if at all, before its latest one;
	// at least one was replaced while it waited, and never went.
	ids, olderSent := accepted.list(), 0
	for _, name := range objects {
		if i := slices.Index(ids, name); i >= 0 {
			olderSent++
			g.Expect(i).To(BeNumerically("<", slices.Index(ids, name+"-latest")), "%s's older report went after its latest", name)
		}
	}
	g.Expect(olderSent).To(BeNumerically("<", len(objects)))
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const fallback = 10 * time.Second
	tests := []struct {
		name, header string
		want         time.Duration
	}{
		{name: "seconds", header: "3", want: 3 * time.Second},
		{name: "HTTP date", header: now.Add(20 * time.Second).Format(http.TimeFormat), want: 20 * time.Second},
		{name: "date in the past", header: now.Add(-time.Minute).Format(http.TimeFormat), want: 0},
		{name: "negative", header: "-5", want: 0},
		{name: "absurdly long", header: "100000", want: maxRetryAfter},
		{name: "past the range of a Duration", header: "99999999999999999", want: maxRetryAfter},
		{name: "missing", header: "", want: fallback},
		{name: "garbage", header: "soon", want: fallback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfter(tt.header, now, fallback); got != tt.want {
				t.Fatalf("retryAfter(%q) = %s, want %s", tt.header, got, tt.want)
			}
		})
	}
}

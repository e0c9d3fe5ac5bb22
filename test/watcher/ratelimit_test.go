package watcher

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
	watcherctrl "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// A runtime owner takes the agent's client key (it is readable inside the
// runtime) and floods the listener with valid reports. The listener answers
// it 429 once its bucket is empty (the operator's default limits), while
// another runtime's reports — its agent's and direct ones — are all
// accepted, and an edit in that runtime reaches its control-plane Kyma.
func TestFloodingRuntimeDoesNotHoldUpAnother(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	defaults := operator.DefaultWatcherOptions()
	b := newWatchedKyma(t, "rate-quiet")

	flooding := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: "rate-flooding", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: "rt-rate-flooding"}},
		Spec:       v1beta2.KymaSpec{Channel: "regular"},
	}
	g.Expect(env.kcpClient.Create(ctx, flooding)).To(Succeed())
	defer func() { _ = env.kcpClient.Delete(ctx, flooding) }()
	creds := &corev1.Secret{}
	g.Eventually(func() error {
		return env.kcpClient.Get(ctx, client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(flooding.Name)}, creds)
	}, timeout, interval).Should(Succeed())
	flooder := reporter(g, creds.Data[pki.ClientCertKey], creds.Data[pki.ClientKeyKey], creds.Data[pki.CAKey])

	// 8 connections send reports until the quiet runtime is done.
	limitedBefore := counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonRateLimited))
	var accepted, limited, failed atomic.Int64
	var badRetryAfter atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := flooder.Post("https://"+env.listenerAddr+report.ReportPath, "application/json", bytes.NewReader(reportFor(flooding.Name)))
				if err != nil {
					failed.Add(1)
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
				default:
					failed.Add(1)
				}
			}
		})
	}
	stopFlood := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopFlood()
	g.Eventually(limited.Load, timeout, interval).Should(BeNumerically(">", 0), "the flooding runtime is never answered 429")

	// During the flood the quiet runtime's owner edits its Kyma: the agent's
	// report is accepted at its first attempt, and the change reaches the
	// control plane, whose periodic reconcile is an hour away.
	sentBefore := counter(b.agent.Metrics().ReportsSent)
	editRuntimeKyma(t, addModule("edited-during-flood"))
	g.Eventually(b.statusModules, timeout, interval).Should(ContainElement("edited-during-flood"))
	g.Eventually(func() float64 { return counter(b.agent.Metrics().ReportsSent) }, timeout, interval).Should(BeNumerically(">", sentBefore))
	// Its direct reports are all accepted too.
	c := b.reporter(g)
	for i := range 20 {
		code, msg, err := post(c, reportFor(b.name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusAccepted), "report %d of the quiet runtime during the flood: %s", i, msg)
	}
	stopFlood()
	elapsed := time.Since(start)

	g.Expect(b.failures(agent.ReasonThrottled)).To(BeZero(), "the quiet runtime's agent was throttled")
	g.Expect(b.failures(agent.ReasonServerError)).To(BeZero())
	g.Expect(b.failures(agent.ReasonRetriesExhausted)).To(BeZero())
	g.Expect(failed.Load()).To(BeZero(), "flood requests failed otherwise than with 202 or 429")
	g.Expect(badRetryAfter.Load()).To(BeNil(), "a 429 without a Retry-After of whole seconds")
	g.Expect(accepted.Load()).To(BeNumerically("<=", int64(defaults.ReportBurst)+int64(elapsed.Seconds()*defaults.ReportRate)+1),
		"the flooding runtime got more than its burst and rate")
	g.Expect(counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonRateLimited))).To(BeNumerically(">=", limitedBefore+float64(limited.Load())))
	t.Logf("flooding runtime: %d reports accepted, %d answered 429 in %s", accepted.Load(), limited.Load(), elapsed.Round(time.Millisecond))

	editRuntimeKyma(t, removeModule("edited-during-flood"))
	g.Eventually(b.statusModules, timeout, interval).ShouldNot(ContainElement("edited-during-flood"))
}

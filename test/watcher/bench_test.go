package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
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
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
	watcherctrl "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// BenchmarkReportLatency measures, over BENCH_CHANGES (default 100) edits of
// a runtime's own Kyma, the time from the edit (the client's update call) to
// the start of the control plane's Kyma reconcile, and to the change being
// visible in the control-plane Kyma's status. The path is the real one:
// runtime API server → webhook → agent (coalescing window included) → mTLS →
// listener → Kyma work queue → reconcile. A change reaches the status on the
// first reconcile unless the runtime stored it after that reconcile read it;
// then the listener's recheck brings it (that shows in the status p99).
// Changes are paced so that one change's recheck is not taken for the next
// one's reconcile. BENCH_COALESCE (a duration,
// default the agent's 100ms) sets the agent's coalescing window.
func BenchmarkReportLatency(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	changes := envInt("BENCH_CHANGES", 100)
	window := agent.DefaultOptions().CoalesceWindow
	if d, err := time.ParseDuration(os.Getenv("BENCH_COALESCE")); err == nil {
		window = d
	}
	k := newWatchedKyma(b, "latency", func(o *agent.Options) { o.CoalesceWindow = window })

	for b.Loop() {
		toStart := make([]time.Duration, 0, changes)
		toStatus := make([]time.Duration, 0, changes)
		for i := range changes {
			const module = "latency-probe"
			present := i%2 == 0
			reconciles := counter(metrics.KymaReconciles)
			rechecks := counter(metrics.ListenerRechecks)
			var changed time.Time
			g.Eventually(func(g Gomega) {
				kyma := &v1beta2.Kyma{}
				g.Expect(env.rtClient.Get(ctx, runtimeKymaKey, kyma)).To(Succeed())
				if present {
					addModule(module)(kyma)
				} else {
					removeModule(module)(kyma)
				}
				changed = time.Now()
				g.Expect(env.rtClient.Update(ctx, kyma)).To(Succeed())
			}, timeout, time.Millisecond).Should(Succeed())

			deadline := changed.Add(30 * time.Second)
			for counter(metrics.KymaReconciles) == reconciles {
				g.Expect(time.Now().Before(deadline)).To(BeTrue(), "change %d never started a reconcile", i)
				time.Sleep(250 * time.Microsecond)
			}
			toStart = append(toStart, time.Since(changed))
			for slices.Contains(k.statusModules(g), module) != present {
				g.Expect(time.Now().Before(deadline)).To(BeTrue(), "change %d never reached the status", i)
				time.Sleep(2 * time.Millisecond)
			}
			toStatus = append(toStatus, time.Since(changed))

			// The listener's recheck of this change, and its reconcile, pass
			// before the next change, so that they are not taken for its.
			for counter(metrics.ListenerRechecks) == rechecks {
				g.Expect(time.Now().Before(deadline)).To(BeTrue(), "change %d was never rechecked", i)
				time.Sleep(5 * time.Millisecond)
			}
			waitQuiet(g, 100*time.Millisecond, deadline)
		}
		b.StopTimer()
		p50, p99 := percentile(toStart, 50), percentile(toStart, 99)
		s50, s99 := percentile(toStatus, 50), percentile(toStatus, 99)
		b.ReportMetric(ms(p50), "p50-ms")
		b.ReportMetric(ms(p99), "p99-ms")
		b.ReportMetric(ms(s50), "status-p50-ms")
		b.ReportMetric(ms(s99), "status-p99-ms")
		fmt.Printf("BenchmarkReportLatency: %d changes, coalescing window %s; runtime change to reconcile start p50 %.1f ms, p99 %.1f ms; to control-plane status p50 %.1f ms, p99 %.1f ms\n",
			changes, window, ms(p50), ms(p99), ms(s50), ms(s99))
		b.StartTimer()
	}
}

// BenchmarkListenerThroughput sends reports from BENCH_RUNTIMES (default 50)
// runtimes at once, each with its own certificate and connection,
// BENCH_REPORTS (default 200) reports each, and reports the listener's
// accepted reports per second and its answer time.
func BenchmarkListenerThroughput(b *testing.B) {
	g := NewWithT(b)
	ctx := context.Background()
	runtimes := envInt("BENCH_RUNTIMES", 50)
	perRuntime := envInt("BENCH_REPORTS", 200)

	clients := make([]*http.Client, runtimes)
	names := make([]string, runtimes)
	for i := range runtimes {
		names[i] = fmt.Sprintf("throughput-%03d", i)
		g.Expect(env.kcpClient.Create(ctx, &v1beta2.Kyma{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: kcpNamespace,
				Labels: map[string]string{v1beta2.RuntimeIDLabel: "rt-" + names[i], "bench": "throughput"}},
			Spec: v1beta2.KymaSpec{Channel: "regular"},
		})).To(Succeed())
	}
	defer func() {
		g.Expect(env.kcpClient.DeleteAllOf(ctx, &v1beta2.Kyma{}, client.InNamespace(kcpNamespace), client.MatchingLabels{"bench": "throughput"})).To(Succeed())
		g.Eventually(func(g Gomega) {
			list := &v1beta2.KymaList{}
			g.Expect(env.kcpClient.List(ctx, list, client.MatchingLabels{"bench": "throughput"})).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}, 5*time.Minute, 200*time.Millisecond).Should(Succeed())
	}()
	// Each runtime's certificate, as the operator issued it.
	for i, name := range names {
		secret := &corev1.Secret{}
		g.Eventually(func() error {
			return env.kcpClient.Get(ctx, client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(name)}, secret)
		}, 5*time.Minute, 100*time.Millisecond).Should(Succeed())
		clients[i] = reporter(g, secret.Data[pki.ClientCertKey], secret.Data[pki.ClientKeyKey], secret.Data[pki.CAKey])
	}
	bodies := make([][]byte, runtimes)
	for i, name := range names {
		bodies[i], _ = json.Marshal(report.Report{ID: "bench", Kyma: name, Operation: "UPDATE",
			Object:    report.ObjectRef{Group: v1beta2.GroupVersion.Group, Version: "v1beta2", Kind: "Kyma", Namespace: runtimeNamespace, Name: "default"},
			ChangedAt: time.Now()})
	}
	// Warm up: one handshake per runtime, outside the measurement.
	for i := range runtimes {
		code, msg, err := post(clients[i], bodies[i])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusAccepted), msg)
	}

	for b.Loop() {
		var failed atomic.Int64
		answers := make([][]time.Duration, runtimes)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range runtimes {
			wg.Go(func() {
				answers[i] = make([]time.Duration, 0, perRuntime)
				for range perRuntime {
					sent := time.Now()
					code, _, err := post(clients[i], bodies[i])
					if err != nil || code != http.StatusAccepted {
						failed.Add(1)
						continue
					}
					answers[i] = append(answers[i], time.Since(sent))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		all := slices.Concat(answers...)
		g.Expect(failed.Load()).To(BeZero(), "reports were refused or failed")
		rate := float64(len(all)) / elapsed.Seconds()
		b.ReportMetric(rate, "reports/s")
		b.ReportMetric(ms(percentile(all, 50)), "answer-p50-ms")
		b.ReportMetric(ms(percentile(all, 99)), "answer-p99-ms")
		fmt.Printf("BenchmarkListenerThroughput: %d runtimes x %d reports in %s: %.0f reports/s; answer p50 %.2f ms, p99 %.2f ms\n",
			runtimes, perRuntime, elapsed.Round(time.Millisecond), rate, ms(percentile(all, 50)), ms(percentile(all, 99)))
		b.StartTimer()
	}
}

// waitQuiet returns once no Kyma reconcile started for d.
func waitQuiet(g Gomega, d time.Duration, deadline time.Time) {
	last, since := counter(metrics.KymaReconciles), time.Now()
	for time.Since(since) < d {
		g.Expect(time.Now().Before(deadline)).To(BeTrue(), "the Kyma controller does not come to rest")
		time.Sleep(5 * time.Millisecond)
		if now := counter(metrics.KymaReconciles); now != last {
			last, since = now, time.Now()
		}
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

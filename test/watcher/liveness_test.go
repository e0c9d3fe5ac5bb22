package watcher

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// The WatcherReporting condition follows the agent: True once it is heard,
// False (WatcherSilent) once it is silent past the timeout, True again when
// it is back. It is written on those transitions only: neither heartbeats
// nor the fallback's reconciles of a silent runtime write the Kyma, as the
// control plane's own count of Kyma writes shows.
func TestWatcherReportingIsWrittenOnTransitionsOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newWatchedKyma(t, "liveness")
	key := client.ObjectKey{Namespace: kcpNamespace, Name: k.name}
	reporting := func(g Gomega) metav1.Condition {
		kyma := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(ctx, key, kyma)).To(Succeed())
		c := meta.FindStatusCondition(kyma.Status.Conditions, v1beta2.ConditionWatcherReporting)
		g.Expect(c).NotTo(BeNil(), "the Kyma has no %s condition", v1beta2.ConditionWatcherReporting)
		return *c
	}
	kymaWrites := func() float64 {
		n, err := env.kcp.Requests(ctx, func(l map[string]string) bool {
			switch l["verb"] {
			case "PATCH", "UPDATE", "APPLY":
				return l["resource"] == "kymas"
			}
			return false
		})
		g.Expect(err).NotTo(HaveOccurred())
		return n
	}
	heartbeats := func() float64 { return counter(k.agent.Metrics().Heartbeats.WithLabelValues("ok")) }

	g.Eventually(func(g Gomega) {
		c := reporting(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(v1beta2.ReasonWatcherHeard))
	}, timeout, interval).Should(Succeed())
	heardSince := reporting(g).LastTransitionTime

	// Heartbeats for longer than the silence timeout write nothing.
	writes, beats := kymaWrites(), heartbeats()
	g.Eventually(heartbeats, timeout, interval).Should(BeNumerically(">=", beats+2*float64(silenceTimeout/heartbeat)))
	g.Expect(kymaWrites()).To(Equal(writes), "heartbeats wrote the Kyma")
	g.Expect(reporting(g).LastTransitionTime).To(Equal(heardSince))

	// The agent cut off from the listener goes silent.
	k.proxy.stop()
	g.Eventually(func(g Gomega) {
		c := reporting(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(v1beta2.ReasonWatcherSilent))
	}, timeout, interval).Should(Succeed())
	silentSince := reporting(g).LastTransitionTime
	g.Expect(silentSince.Before(&heardSince)).To(BeFalse())

	// The fallback keeps reconciling the silent runtime; that writes nothing
	// more either.
	writes, fallbacks := kymaWrites(), counter(metrics.WatcherFallbackRequeues)
	g.Eventually(func() float64 { return counter(metrics.WatcherFallbackRequeues) }, timeout, interval).Should(BeNumerically(">=", fallbacks+3))
	k.settle(t)
	g.Expect(kymaWrites()).To(Equal(writes), "the fallback's reconciles of a silent runtime wrote the Kyma")
	g.Expect(reporting(g).LastTransitionTime).To(Equal(silentSince))

	// Back in reach, its first heartbeat turns the condition True again.
	g.Expect(k.proxy.start()).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := reporting(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(v1beta2.ReasonWatcherHeard))
	}, timeout, interval).Should(Succeed())
}

package rollout

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	lmrollout "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/rollout"
)

// errorRatio is the gauge the analysis of TestFailedAnalysisHaltsTheRollout
// queries, one series per runtime (label runtime).
const errorRatio = "rollout_test_error_ratio"

// setErrorRatios sets each runtime's error ratio and waits until
// Prometheus returns these values: a scrape took them.
func setErrorRatios(ratios map[string]float64) {
	for rt, v := range ratios {
		env.gauges.Set(errorRatio, map[string]string{"runtime": rt}, v)
	}
	Eventually(func(g Gomega) {
		got, err := env.prometheus.Samples(context.Background(), errorRatio, "runtime")
		g.Expect(err).NotTo(HaveOccurred())
		for rt, want := range ratios {
			g.Expect(got).To(HaveKeyWithValue(rt, want))
		}
	}, timeout, interval).Should(Succeed())
}

// A health gate (SPEC G1, issue 29 item 8): the rollout's analysis queries
// a real Prometheus for each runtime's error ratio. One canary's is above
// the bound: the rollout halts with the analysis and the runtime named,
// and no runtime but the canaries moves. With its ratio fixed and the
// rollout resumed (spec.resume), the other runtimes follow, each wave
// passing the analysis.
func TestFailedAnalysisHaltsTheRollout(t *testing.T) {
	RegisterTestingT(t)
	const module = "meter"
	publishModule(t, module, configMap(module, "2.0.0"))
	names := newFleet(t, "meter", module, 8, 1, 6)
	ratios := map[string]float64{}
	for _, name := range names {
		ratios[name] = 0.01
	}
	ratios[names[6]] = 0.21
	setErrorRatios(ratios)
	eventuallyAt(names, module, "1.0.0")
	ro := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-regular", Namespace: kcpNamespace},
		Spec: v1beta2.ModuleRolloutSpec{
			ModuleName: module, Channel: "regular",
			Canary:      &v1beta2.RolloutCanary{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{canaryLabel: "true"}}, Count: intstr.FromInt32(2)},
			MaxInFlight: intstr.FromInt32(5),
			Analysis: []v1beta2.RolloutAnalysis{{
				Name:       "error-rate",
				Prometheus: &v1beta2.PrometheusAnalysis{Query: errorRatio + `{runtime="{runtime}"}`, Max: "0.05"},
			}},
		},
	}
	Expect(env.kcpClient.Create(context.Background(), ro)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), ro) })
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted))
		g.Expect(ro.Status.ToVersion).To(Equal("1.0.0"))
	}, timeout, interval).Should(Succeed())

	tr := record(t, module, "2.0.0")
	moveChannel(t, module)
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutHalted), "haltReason %q", ro.Status.HaltReason)
		g.Expect(ro.Status.Failed).To(ConsistOf(names[6]))
		g.Expect(ro.Status.HaltReason).To(ContainSubstring(names[6]))
		g.Expect(ro.Status.HaltReason).To(ContainSubstring("error-rate: 0.21 > max 0.05"))
	}, timeout, interval).Should(Succeed())
	t.Logf("Halted: %s", ro.Status.HaltReason)
	Consistently(func(g Gomega) {
		asked, _ := tr.Order()
		g.Expect(asked).To(ConsistOf(names[1], names[6]), "only the canaries moved")
	}, 3*time.Second, interval).Should(Succeed())
	for _, name := range names {
		if name == names[1] || name == names[6] {
			continue
		}
		m := &v1beta2.Manifest{}
		Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(name, module)}, m)).To(Succeed())
		Expect(m.Spec.Version).To(Equal("1.0.0"), name)
	}

	// The canary's error ratio falls; the halt holds until someone
	// resumes the rollout, which then completes, every wave analysed.
	setErrorRatios(map[string]float64{names[6]: 0.01})
	Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
	Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutHalted), "a halt is sticky")
	Expect(lmrollout.Resume(context.Background(), env.kcpClient, kcpNamespace, ro.Name, "test: error ratio fixed")).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(ro), ro)).To(Succeed())
		g.Expect(ro.Status.Phase).To(Equal(v1beta2.RolloutCompleted), "haltReason %q", ro.Status.HaltReason)
		g.Expect(ro.Status.ResumedBy).To(Equal("test: error ratio fixed"))
		g.Expect(ro.Status.Done).To(Equal(int32(len(names))))
	}, timeout, interval).Should(Succeed())
	eventuallyAt(names, module, "2.0.0")
}

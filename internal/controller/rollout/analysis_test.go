package rollout

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Outcomes are reused within a wave for a while, but never across a change
// of the spec: a resume must be judged on fresh outcomes, or outcomes from
// before the fix halt the rollout again and use the resume up.
func TestAnalysisOutcomesAreAskedAfreshAfterASpecChange(t *testing.T) {
	g := NewWithT(t)
	ro := &v1beta2.ModuleRollout{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Generation: 1}, Status: v1beta2.ModuleRolloutStatus{Wave: 1}}
	kymas := []string{"k1"}
	memo := &analysisMemo{}
	runs := 0
	run := func(failed string) func() map[string]AnalysisOutcome {
		return func() map[string]AnalysisOutcome { runs++; return map[string]AnalysisOutcome{"k1": {Failed: failed}} }
	}
	g.Expect(memo.get(ro, kymas, run("error-rate: 0.2 > max 0.05"))["k1"].Failed).NotTo(BeEmpty())
	g.Expect(memo.get(ro, kymas, run(""))["k1"].Failed).NotTo(BeEmpty(), "reused within the same wave and spec")
	g.Expect(runs).To(Equal(1))

	ro.Generation = 2 // resumed
	g.Expect(memo.get(ro, kymas, run(""))["k1"].Failed).To(BeEmpty(), "asked afresh")
	ro.Status.Wave = 2
	memo.get(ro, kymas, run(""))
	g.Expect(runs).To(Equal(3), "and afresh in the next wave")
}

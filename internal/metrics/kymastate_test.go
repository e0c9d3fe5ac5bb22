package metrics_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// series lists a gauge vector's series of the given Kyma as "label=value,…".
func series(g Gomega, vec *prometheus.GaugeVec, kyma string) []string {
	ch := make(chan prometheus.Metric, 100)
	vec.Collect(ch)
	close(ch)
	var out []string
	for m := range ch {
		pb := &dto.Metric{}
		g.Expect(m.Write(pb)).To(Succeed())
		s, mine := "", false
		for _, l := range pb.GetLabel() {
			mine = mine || (l.GetName() == "kyma" && l.GetValue() == kyma)
			if l.GetName() != "kyma" {
				s += l.GetName() + "=" + l.GetValue() + ","
			}
		}
		if mine {
			out = append(out, s)
		}
	}
	return out
}

// A Kyma's states replace its own earlier series only: another Kyma, even
// one whose name starts with the same letters, keeps its series.
func TestSetKymaStatesReplacesOnlyTheKymasOwnSeries(t *testing.T) {
	g := NewWithT(t)
	metrics.SetKymaStates("states-a", "Processing", map[string]string{"m1": "Processing", "m2": "Processing"})
	metrics.SetKymaStates("states-a-2", "Processing", map[string]string{"m1": "Processing"})

	metrics.SetKymaStates("states-a", "Ready", map[string]string{"m1": "Ready"})
	g.Expect(series(g, metrics.KymaState, "states-a")).To(ConsistOf("state=Ready,"))
	g.Expect(series(g, metrics.ModuleState, "states-a")).To(ConsistOf("module=m1,state=Ready,"))
	g.Expect(series(g, metrics.KymaState, "states-a-2")).To(ConsistOf("state=Processing,"))
	g.Expect(series(g, metrics.ModuleState, "states-a-2")).To(ConsistOf("module=m1,state=Processing,"))

	metrics.ForgetKyma("states-a")
	metrics.ForgetKyma("states-unknown")
	g.Expect(series(g, metrics.KymaState, "states-a")).To(BeEmpty())
	g.Expect(series(g, metrics.ModuleState, "states-a")).To(BeEmpty())
	g.Expect(series(g, metrics.KymaState, "states-a-2")).To(ConsistOf("state=Processing,"))
	metrics.ForgetKyma("states-a-2")
}

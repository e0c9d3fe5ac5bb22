package e2e

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// TestModuleValuesOverrideChartValues sets values on the Kyma's module entry:
// they override the chart's values key by key, and changing them re-renders.
func TestModuleValuesOverrideChartValues(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	chart := module(samplemodules.Chart)
	chart.Values = &runtime.RawExtension{Raw: []byte(`{"greeting":"hello from the Kyma"}`)}
	k := newKyma(t, chart)
	k.eventuallyReady(t)

	settings := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(settings, "chart-settings")).To(Succeed())
	g.Expect(settings.Data).To(HaveKeyWithValue("greeting", "hello from the Kyma"))
	g.Expect(settings.Data).To(HaveKeyWithValue("replicas", "1"), "values not overridden keep the chart's")

	k.update(t, func(kyma *v1beta2.Kyma) {
		kyma.Spec.Modules[0].Values = &runtime.RawExtension{Raw: []byte(`{"greeting":"changed"}`)}
	})
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(cm, "chart-settings")).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "changed"))
	}, timeout, interval).Should(Succeed())
}

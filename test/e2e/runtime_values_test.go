package e2e

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// publishTunableChart publishes the sample chart as a module of its own whose
// template lets runtime owners set only the given value keys.
func publishTunableChart(t *testing.T, name string, runtimeValues ...string) {
	t.Helper()
	g := NewWithT(t)
	chart, err := samplemodules.Get(samplemodules.Chart, "1.0.0")
	g.Expect(err).NotTo(HaveOccurred())
	chart.Module = name
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:1.0.0", env.registry.Host(), name),
		chart.Content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	template := chart.Template(kcpNamespace, artifact.Links)
	template.Spec.RuntimeValues = runtimeValues
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
}

func moduleWithValues(name, values string) v1beta2.Module {
	m := module(name)
	m.Values = &runtime.RawExtension{Raw: []byte(values)}
	return m
}

// TestRuntimeValuesOnlyUnderAllowedKeys checks item 3 of issue 10 (values
// part): a runtime owner's values under a key the module allows are applied;
// a value under any other key is refused with a message naming the key, and
// what is installed stays as it was; the SRE's values in the control plane's
// Kyma are not restricted.
func TestRuntimeValuesOnlyUnderAllowedKeys(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "tunable-chart"
	publishTunableChart(t, name, "greeting")
	k := newKyma(t)
	k.eventuallyReady(t)
	settings := name + "-settings"

	// An allowed key is applied.
	k.updateRuntimeKyma(t, func(remote *v1beta2.Kyma) {
		remote.Spec.Modules = []v1beta2.Module{moduleWithValues(name, `{"greeting":"from the runtime owner"}`)}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(k.moduleStatus(g, name).State).To(Equal(v1beta2.StateReady))
		cm := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(cm, settings)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "from the runtime owner"))
	}, timeout, interval).Should(Succeed())
	manifestKey := client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, name)}
	before := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(ctx, manifestKey, before)).To(Succeed())

	// A key the module does not allow is refused, with the allowed one.
	k.updateRuntimeKyma(t, func(remote *v1beta2.Kyma) {
		remote.Spec.Modules = []v1beta2.Module{moduleWithValues(name, `{"greeting":"changed","replicas":5}`)}
	})
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, name)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		g.Expect(m.Message).To(And(ContainSubstring("replicas"), ContainSubstring("allowed: greeting"),
			ContainSubstring("remove them from the module's values in the runtime's Kyma")))
		g.Expect(k.runtimeKyma(g).Status.Modules).To(ContainElement(HaveField("Message", ContainSubstring("replicas"))),
			"the runtime owner sees why in their own Kyma")
	}, timeout, interval).Should(Succeed())
	after := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(ctx, manifestKey, after)).To(Succeed())
	g.Expect(after.Generation).To(Equal(before.Generation), "the Manifest is not rewritten")
	g.Expect(after.Spec.Values.Raw).To(MatchJSON(before.Spec.Values.Raw))
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, settings)).To(Succeed())
	g.Expect(cm.Data).To(And(HaveKeyWithValue("greeting", "from the runtime owner"), HaveKeyWithValue("replicas", "1")),
		"what is installed stays as it was")

	// The SRE may set any key: the control plane's entry wins.
	k.update(t, func(kcp *v1beta2.Kyma) {
		kcp.Spec.Modules = []v1beta2.Module{moduleWithValues(name, `{"replicas":2}`)}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(k.moduleStatus(g, name).State).To(Equal(v1beta2.StateReady))
		cm := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(cm, settings)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("replicas", "2"))
	}, timeout, interval).Should(Succeed())
}

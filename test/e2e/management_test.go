package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	kymactrl "github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// TestUnmanagedModuleKeepsItsResources sets managed: false: the operator
// stops managing the module, leaves its resources, and removes its labels
// from them.
func TestUnmanagedModuleKeepsItsResources(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Modules[0].Managed = false })
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, samplemodules.Evolving)
		g.Expect(m.State).To(Equal(v1beta2.StateUnmanaged))
		err := env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-evolving"}, &v1beta2.Manifest{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Manifest is gone")
	}, timeout, interval).Should(Succeed())

	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, "evolving-config")).To(Succeed(), "resources stay")
	g.Expect(cm.Labels).NotTo(HaveKey(v1beta2.ManagedByLabel))
	g.Expect(cm.Labels).NotTo(HaveKey(v1beta2.KymaNameLabel))
	k.eventuallyReady(t)

	// The runtime's owner now owns them: remove them as they would, so that
	// the next Kyma on this runtime does not find them in its way (a module
	// never takes over objects that are not its own).
	g.Expect(k.runtime.client.Delete(context.Background(), cm)).To(Succeed())
	g.Expect(k.runtime.client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "evolving-dropped-in-2", Namespace: v1beta2.DefaultRuntimeNamespace}})).To(Succeed())
}

// TestKymaOfAVanishedRuntimeCanBeDeleted deletes the Kyma of a runtime
// whose Secret is gone for good: nothing can be cleaned up there, and the
// Kyma must not hang on its finalizers.
func TestKymaOfAVanishedRuntimeCanBeDeleted(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	g.Expect(env.kcpClient.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kcpNamespace),
		client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, &v1beta2.Kyma{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	// What was in the runtime stays there: the operator could not reach it.
	// Clean it up as the runtime's owner would, for the next test.
	rc := k.runtime.client
	g.Expect(rc.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(v1beta2.DefaultRuntimeNamespace),
		client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
	remote := &v1beta2.Kyma{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}, remote)).To(Succeed())
	remote.Finalizers = nil
	g.Expect(rc.Update(ctx, remote)).To(Succeed())
	g.Expect(rc.Delete(ctx, remote)).To(Succeed())
}

// TestUnchangedObjectsAreNotWritten checks that drift checks of a Ready
// module do not write to the runtime when nothing drifted.
func TestUnchangedObjectsAreNotWritten(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, "evolving-config")).To(Succeed())
	before := cm.ResourceVersion

	// Several Ready intervals (2s in these tests) pass.
	g.Consistently(func(g Gomega) {
		now := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(now, "evolving-config")).To(Succeed())
		g.Expect(now.ResourceVersion).To(Equal(before))
	}, "5s", "250ms").Should(Succeed())
}

// TestMetricsAndEvents checks that a module going Ready shows in the state
// gauges and the time-to-ready histogram, and that the Kyma got an event.
func TestMetricsAndEvents(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	g.Eventually(func(g Gomega) {
		g.Expect(gauge(g, "lifecycle_manager_module_state", map[string]string{"kyma": k.name, "module": "evolving", "state": "Ready"})).To(Equal(1.0))
		g.Expect(gauge(g, "lifecycle_manager_kyma_state", map[string]string{"kyma": k.name, "state": "Ready"})).To(Equal(1.0))
		g.Expect(histogramCount(g, "lifecycle_manager_module_time_to_ready_seconds", map[string]string{"module": "evolving"})).To(BeNumerically(">", 0))
	}, timeout, interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(env.kcpClient.List(context.Background(), events, client.InNamespace(kcpNamespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Regarding.Name", k.name),
			HaveField("Reason", kymactrl.ReasonModulesChanged),
		)))
	}, timeout, interval).Should(Succeed())
}

func findMetric(g Gomega, name string, labels map[string]string) *dto.Metric {
	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

func gauge(g Gomega, name string, labels map[string]string) float64 {
	m := findMetric(g, name, labels)
	if m == nil {
		return 0
	}
	return m.GetGauge().GetValue()
}

func histogramCount(g Gomega, name string, labels map[string]string) uint64 {
	m := findMetric(g, name, labels)
	if m == nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

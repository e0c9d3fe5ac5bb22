package watcher

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
)

// moduleWatcher watches the evolving module's ConfigMaps in runtimes.
const moduleWatcher = "module-configmaps"

// A runtime owner edits a module's ConfigMap; the report about it requeues
// the module's Manifest, which puts the ConfigMap back within seconds,
// although the operator's Ready interval is an hour and a Kyma reconcile
// leaves an unchanged Manifest alone.
func TestModuleResourceDriftIsCorrectedAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newWatchedKyma(t, "drift")

	k.installEvolving(g)
	configKey := client.ObjectKey{Namespace: runtimeNamespace, Name: "evolving-config"}
	g.Expect(env.rtClient.Get(ctx, configKey, &corev1.ConfigMap{})).To(Succeed())

	// The agent reports the module's ConfigMaps from now on.
	g.Expect(env.kcpClient.Create(ctx, &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: moduleWatcher, Namespace: kcpNamespace},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "lifecycle-manager-listener", Namespace: kcpNamespace, Port: 8443},
			LabelsToWatch:   map[string]string{v1beta2.ModuleNameLabel: samplemodules.Evolving},
			ResourceToWatch: v1beta2.WatchableGVR{Version: "v1", Resource: "configmaps"},
			Field:           v1beta2.SpecField,
		},
	})).To(Succeed())
	t.Cleanup(func() {
		_ = env.kcpClient.Delete(context.Background(), &v1beta2.Watcher{ObjectMeta: metav1.ObjectMeta{Name: moduleWatcher, Namespace: kcpNamespace}})
	})
	g.Eventually(func(g Gomega) {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(env.rtClient.Get(ctx, client.ObjectKey{Name: webhookConfig}, cfg)).To(Succeed())
		g.Expect(cfg.Webhooks).To(ContainElement(HaveField("Name", HavePrefix(moduleWatcher+"."))))
	}, timeout, interval).Should(Succeed())
	// The runtime's API server calls the agent for them once its webhook
	// informer has the new rule: a labelled probe's update proves it.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-module-" + k.name, Namespace: "default",
		Labels: map[string]string{v1beta2.ModuleNameLabel: samplemodules.Evolving}}}
	g.Expect(env.rtClient.Create(ctx, probe)).To(Succeed())
	t.Cleanup(func() { _ = env.rtClient.Delete(context.Background(), probe) })
	g.Eventually(func(g Gomega) {
		before := k.admissions("UPDATE", agent.ResultReported)
		g.Expect(env.rtClient.Get(ctx, client.ObjectKeyFromObject(probe), probe)).To(Succeed())
		probe.Data = map[string]string{"at": time.Now().String()}
		g.Expect(env.rtClient.Update(ctx, probe)).To(Succeed())
		g.Expect(k.admissions("UPDATE", agent.ResultReported)).To(BeNumerically(">", before))
	}, timeout, 200*time.Millisecond).Should(Succeed(), "the runtime's API server does not call the agent for module ConfigMaps")
	k.settle(t)

	accepted := counter(metrics.ListenerReportsAccepted)
	start := time.Now()
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.rtClient.Get(ctx, configKey, cm)).To(Succeed())
		cm.Data["version"] = "edited-by-the-owner"
		g.Expect(env.rtClient.Update(ctx, cm)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.rtClient.Get(ctx, configKey, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("version", "1.0.0"))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed(), "the module's drift is not corrected at once")
	t.Logf("module drift in the runtime corrected after %s", time.Since(start).Round(time.Millisecond))
	g.Expect(counter(metrics.ListenerReportsAccepted)).To(BeNumerically(">", accepted))
}

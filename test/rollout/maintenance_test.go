package rollout

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// A version that requires downtime waits for the runtime's maintenance
// window: outside it the module stays at the installed version and says
// until when; at the runtime's point in the window it moves. A Kyma that
// skips maintenance windows moves at once.
func TestDowntimeVersionWaitsForTheWindow(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const module = "vault"
	publish(t, module, "1.0.0", configMap(module, "1.0.0"))
	publish(t, module, "2.0.0", configMap(module, "2.0.0"), func(t *v1beta2.ModuleTemplate) { t.Spec.RequiresDowntime = true })
	offer(t, module)
	names := newFleet(t, "vault", module, 2)
	waiting, skipping := names[0], names[1]
	k := &v1beta2.Kyma{}
	k.SetNamespace(kcpNamespace)
	k.SetName(skipping)
	Expect(env.kcpClient.Patch(ctx, k, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"skipMaintenanceWindows":true}}`)))).To(Succeed())
	eventuallyAt(names, module, "1.0.0")

	moveChannel(t, module)
	eventuallyAt([]string{skipping}, module, "2.0.0")
	slot, ok := windows.SlotFor(waiting, nil, clock.Now())
	Expect(ok).To(BeTrue())
	Eventually(func(g Gomega) {
		m := moduleOf(g, waiting)
		g.Expect(m.Version).To(Equal("1.0.0"))
		g.Expect(m.State).To(Equal(v1beta2.StateReady))
		g.Expect(m.Maintenance).To(BeTrue())
		g.Expect(m.Message).To(ContainSubstring("Version 2.0.0 requires downtime: it is installed in maintenance window saturday-night, at " + slot.At.UTC().Format(time.RFC3339)))
	}, timeout, interval).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(moduleOf(g, waiting).Version).To(Equal("1.0.0"))
	}, 2*time.Second, interval).Should(Succeed())

	// The window opens, but the runtime's point in it is still ahead.
	clock.SetTime(slot.At.Add(-time.Second))
	touch(waiting)
	Consistently(func(g Gomega) {
		g.Expect(moduleOf(g, waiting).Version).To(Equal("1.0.0"))
	}, 2*time.Second, interval).Should(Succeed())

	upgradeAt := slot.At.Add(time.Minute)
	clock.SetTime(upgradeAt)
	touch(waiting)
	eventuallyAt([]string{waiting}, module, "2.0.0")
	Expect(moduleOf(NewWithT(t), waiting).Maintenance).To(BeFalse())

	// The operation history is dated by the operator's clock, as the
	// window is: the upgrade started in the window, not at the real time.
	Eventually(func(g Gomega) {
		ops := manifestOf(g, waiting, module).Status.Operations
		g.Expect(ops).NotTo(BeEmpty())
		g.Expect(ops[0].Type).To(Equal(v1beta2.OperationUpgrade))
		g.Expect(ops[0].ToVersion).To(Equal("2.0.0"))
		g.Expect(ops[0].StartedAt.Time).To(BeTemporally("==", upgradeAt.Truncate(time.Second)))
	}, timeout, interval).Should(Succeed())
}

func moduleOf(g Gomega, kymaName string) v1beta2.ModuleStatus {
	const module = "vault"
	k := &v1beta2.Kyma{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kymaName}, k)).To(Succeed())
	for _, m := range k.Status.Modules {
		if m.Name == module {
			return m
		}
	}
	g.Expect(k.Status.Modules).To(ContainElement(HaveField("Name", module)))
	return v1beta2.ModuleStatus{}
}

// touch makes the Kyma controller look at a Kyma now: a label change, as
// an SRE's edit would. The fake clock moved, and the real requeue it
// scheduled is days away.
func touch(kymaName string) {
	k := &v1beta2.Kyma{}
	k.SetNamespace(kcpNamespace)
	k.SetName(kymaName)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"rollout.lifecycle-manager/touched":"`+time.Now().Format("150405.000000000")+`"}}}`))
	Expect(env.kcpClient.Patch(context.Background(), k, patch)).To(Succeed())
}

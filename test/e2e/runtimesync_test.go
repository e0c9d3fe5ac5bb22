package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// runtimeKyma reads the runtime's own Kyma.
func (k *testKyma) runtimeKyma(g Gomega) *v1beta2.Kyma {
	remote := &v1beta2.Kyma{}
	g.Expect(k.runtime.client.Get(context.Background(),
		client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}, remote)).To(Succeed())
	return remote
}

// updateRuntimeKyma changes the runtime's Kyma as its owner would.
func (k *testKyma) updateRuntimeKyma(t *testing.T, change func(*v1beta2.Kyma)) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		remote := k.runtimeKyma(g)
		change(remote)
		g.Expect(k.runtime.client.Update(context.Background(), remote)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func moduleNames(modules []v1beta2.Module) []string {
	names := make([]string, 0, len(modules))
	for _, m := range modules {
		names = append(names, m.Name)
	}
	return names
}

// TestRuntimeGetsCRDsAndItsOwnKyma checks R6/R7: the runtime gets the CRDs
// it needs and a protected Kyma of its own that mirrors the status.
func TestRuntimeGetsCRDsAndItsOwnKyma(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	for _, name := range kyma.RuntimeCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(k.runtime.client.Get(context.Background(), client.ObjectKey{Name: name}, crd)).To(Succeed(), name)
	}
	g.Eventually(func(g Gomega) {
		remote := k.runtimeKyma(g)
		g.Expect(remote.Finalizers).To(ContainElement(v1beta2.KymaFinalizer))
		g.Expect(remote.Status.State).To(Equal(v1beta2.StateReady))
		g.Expect(remote.Status.Modules).To(ContainElement(And(HaveField("Name", samplemodules.Evolving), HaveField("State", v1beta2.StateReady))))
		g.Expect(remote.Spec.Modules).To(BeEmpty(), "the control plane's modules are not written into the runtime's spec")
	}, timeout, interval).Should(Succeed())
}

// TestRuntimeOwnerAndControlPlaneModulesAreUnited checks that modules the
// runtime owner adds are installed next to the control plane's, that neither
// side's list is written by the other, and that a module listed on both
// sides stays until both drop it.
func TestRuntimeOwnerAndControlPlaneModulesAreUnited(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	k.updateRuntimeKyma(t, func(remote *v1beta2.Kyma) {
		remote.Spec.Modules = append(remote.Spec.Modules, module(samplemodules.Chart))
	})
	g.Eventually(func(g Gomega) {
		g.Expect(k.moduleStatus(g, samplemodules.Chart).State).To(Equal(v1beta2.StateReady))
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, "chart-settings")).To(Succeed())
	}, timeout, interval).Should(Succeed())

	// The control plane adds the same module too, and another one.
	k.update(t, func(kyma *v1beta2.Kyma) {
		kyma.Spec.Modules = append(kyma.Spec.Modules, module(samplemodules.Chart), module(samplemodules.Sample))
	})
	k.eventuallyReady(t)
	g.Eventually(func(g Gomega) {
		g.Expect(moduleNames(k.get(g).Spec.Modules)).To(Equal([]string{"evolving", "chart", "sample"}))
		g.Expect(moduleNames(k.runtimeKyma(g).Spec.Modules)).To(Equal([]string{"chart"}), "the runtime's list is the owner's alone")
		g.Expect(k.get(g).Status.Modules).To(HaveLen(3))
	}, timeout, interval).Should(Succeed())

	// Dropped by the control plane only: still installed.
	k.update(t, func(kyma *v1beta2.Kyma) {
		kyma.Spec.Modules = []v1beta2.Module{module(samplemodules.Evolving), module(samplemodules.Sample)}
	})
	g.Consistently(func(g Gomega) {
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, "chart-settings")).To(Succeed())
	}, "2s", interval).Should(Succeed())

	// Dropped by the runtime owner too: uninstalled.
	k.updateRuntimeKyma(t, func(remote *v1beta2.Kyma) { remote.Spec.Modules = nil })
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, "chart-settings"))).To(BeTrue())
		g.Expect(moduleNames(k.get(g).Spec.Modules)).To(Equal([]string{"evolving", "sample"}))
	}, timeout, interval).Should(Succeed())
	k.eventuallyReady(t)
}

// TestRuntimeKymaDeletedIsRecreatedWithItsModules deletes the runtime's Kyma
// in the runtime: it comes back with the owner's modules, which were never
// uninstalled meanwhile.
func TestRuntimeKymaDeletedIsRecreatedWithItsModules(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)
	k.updateRuntimeKyma(t, func(remote *v1beta2.Kyma) {
		remote.Spec.Modules = append(remote.Spec.Modules, module(samplemodules.Chart))
	})
	settings := &corev1.ConfigMap{}
	g.Eventually(func(g Gomega) {
		g.Expect(k.inRuntime(settings, "chart-settings")).To(Succeed())
	}, timeout, interval).Should(Succeed())

	before := k.runtimeKyma(g)
	g.Expect(k.runtime.client.Delete(context.Background(), before)).To(Succeed())
	g.Eventually(func(g Gomega) {
		remote := k.runtimeKyma(g)
		g.Expect(remote.UID).NotTo(Equal(before.UID), "a new runtime Kyma")
		g.Expect(remote.DeletionTimestamp).To(BeNil())
		g.Expect(moduleNames(remote.Spec.Modules)).To(Equal([]string{"chart"}))
	}, timeout, interval).Should(Succeed())

	after := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(after, "chart-settings")).To(Succeed())
	g.Expect(after.UID).To(Equal(settings.UID), "the module was not reinstalled")
	k.eventuallyReady(t)
}

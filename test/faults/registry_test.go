package faults

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// registryOutageHeld is how long the test keeps checking, during the
// registry outage, that the failed upgrade leaves the old version alone:
// several of the operator's capped retries.
const registryOutageHeld = 3 * backoffCap

// TestRegistryDownDuringUpgrade stops the registry and then upgrades a
// module (channel regular 1.0.0 → fast 2.0.0). The module shows Error and
// stays installed at 1.0.0, objects intact, for as long as the registry is
// down; once it is back, on the same address, the module upgrades in place.
func TestRegistryDownDuringUpgrade(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	k := newKyma(t, "registry-down", env.runtimes[mainRuntime], module(plain))
	k.eventuallyReady(plain)
	manifests := k.manifests(Default, plain)
	objects := k.runtimeObjects(Default)
	expectObjectsOf(Default, objects, plain)

	env.registry.Stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.registry.Restart()
		}
	})
	k.update(func(kyma *v1beta2.Kyma) { kyma.Spec.Modules[0].Channel = "fast" })

	Eventually(func(g Gomega) {
		kyma, states := k.moduleStates(g)
		g.Expect(states).To(HaveKeyWithValue(plain, v1beta2.StateError), testenv.DescribeKyma(kyma))
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateError), testenv.DescribeKyma(kyma))
	}, timeout, interval).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(plainVersionInstalled(g, k)).To(Equal("1.0.0"), "a failed fetch changes nothing installed")
		expectNoneDeletedG(g, objects, k.runtimeObjects(g))
		kyma, states := k.moduleStates(g)
		g.Expect(states).To(HaveKeyWithValue(plain, v1beta2.StateError), testenv.DescribeKyma(kyma))
	}, registryOutageHeld, time.Second).Should(Succeed())

	Expect(env.registry.Restart()).To(Succeed())
	restarted = true
	Eventually(func(g Gomega) {
		g.Expect(plainVersionInstalled(g, k)).To(Equal("2.0.0"))
	}, timeout, interval).Should(Succeed())
	k.eventuallyReady(plain)
	k.expectSameManifests(manifests, plain)
	expectNoneDeleted(objects, k.runtimeObjects(Default))
}

// plainVersionInstalled reads the version the plain module's ConfigMap says.
func plainVersionInstalled(g Gomega, k *testKyma) string {
	cm := &corev1.ConfigMap{}
	g.Expect(k.runtime.client.Get(context.Background(), client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: plain + "-config"}, cm)).To(Succeed())
	return cm.Data["version"]
}

package faults

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// runtimeOutage is how long a runtime is unreachable: minutes, many times
// the operator's backoff cap, so that the operator has long settled into
// capped retries when the runtime comes back.
const runtimeOutage = 2 * time.Minute

// TestRuntimeUnreachableForMinutes stops a runtime's API server for
// minutes. Its Kyma shows Error and is never Ready meanwhile, its Manifests
// stay as they are, and another runtime's Kyma keeps working: a module added
// there during the outage becomes Ready. When the runtime is back, its Kyma
// converges with nothing reinstalled.
func TestRuntimeUnreachableForMinutes(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	env.gates.set(true, gatedRange(0, 3)...)
	down := newKyma(t, "unreachable", env.runtimes[mainRuntime], modules(gated(0), gated(1), plain)...)
	other := newKyma(t, "reachable", env.runtimes[otherRuntime], modules(gated(2))...)
	down.eventuallyReady(gated(0), gated(1), plain)
	other.eventuallyReady(gated(2))
	manifests := down.manifests(Default, gated(0), gated(1), plain)
	objects := down.runtimeObjects(Default)
	expectObjectsOf(Default, objects, gated(0), gated(1), plain)

	cluster := env.runtimes[mainRuntime].cluster
	Expect(cluster.StopAPIServer()).To(Succeed())
	stopped := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = cluster.StartAPIServer(context.Background())
		}
	})
	Eventually(func(g Gomega) {
		kyma := down.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateError), testenv.DescribeKyma(kyma))
	}, timeout, interval).Should(Succeed())

	other.addModules(plain)
	other.eventuallyReady(gated(2), plain)

	// For the rest of the outage: never Ready, and the Manifests untouched.
	Consistently(func(g Gomega) {
		kyma := down.get(g)
		g.Expect(kyma.Status.State).NotTo(Equal(v1beta2.StateReady), testenv.DescribeKyma(kyma))
		after := down.manifests(g, gated(0), gated(1), plain)
		g.Expect(after).To(Equal(manifests), "the Manifests of the unreachable runtime are not recreated")
	}, time.Until(stopped.Add(runtimeOutage)), 2*time.Second).Should(Succeed())

	Expect(cluster.StartAPIServer(context.Background())).To(Succeed())
	restarted = true
	down.eventuallyReady(gated(0), gated(1), plain)
	down.expectSameManifests(manifests, gated(0), gated(1), plain)
	expectNoneDeleted(objects, down.runtimeObjects(Default))
	other.eventuallyReady(gated(2), plain)
}

// TestRuntimeReplacedByEmptyCluster replaces a runtime's API server by an
// empty one at the same address, with the same certificates, so the
// kubeconfig Secret does not change: a runtime rebuilt from scratch. The
// operator reinstalls every module (and the runtime's Kyma and CRDs), and
// the Kyma is Ready again, with the same Manifests.
//
// The Kyma is paused while the cluster is replaced, so that the operator
// sees no outage, only a different cluster: in production a Ready Kyma is
// looked at every few minutes, and a swap within seconds falls between two
// looks. An outage the operator does see makes it drop what it knows of the
// runtime, which would hide the case this test is about.
func TestRuntimeReplacedByEmptyCluster(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	env.gates.set(true, gatedRange(0, 2)...)
	rt := env.runtimes[wipedRuntime]
	k := newKyma(t, "replaced", rt, modules(gated(0), gated(1), plain)...)
	k.eventuallyReady(gated(0), gated(1), plain)
	manifests := k.manifests(Default, gated(0), gated(1), plain)
	before := k.runtimeObjects(Default)

	k.setPaused(true)
	Expect(rt.cluster.ReplaceWithEmpty(context.Background())).To(Succeed())
	Expect(k.runtimeObjects(Default)).To(BeEmpty(), "the new cluster starts empty")
	k.setPaused(false)

	Eventually(func(g Gomega) {
		objects := k.runtimeObjects(g)
		expectObjectsOf(g, objects, gated(0), gated(1), plain)
		for key, uid := range objects {
			g.Expect(before).NotTo(HaveKeyWithValue(key, uid), "%s is a new object", key)
		}
		runtimeKyma := &v1beta2.Kyma{}
		g.Expect(rt.client.Get(context.Background(), runtimeKymaKey, runtimeKyma)).To(Succeed(), "the runtime's Kyma is created again")
	}, timeout, interval).Should(Succeed(), func() string {
		return "the modules are reinstalled into the new cluster; Kyma: " + testenv.DescribeKyma(k.get(Default))
	})
	k.eventuallyReady(gated(0), gated(1), plain)
	k.expectSameManifests(manifests, gated(0), gated(1), plain)
}

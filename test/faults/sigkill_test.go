package faults

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// killOperator kills the operator with SIGKILL and makes sure a new one
// runs again after the test, whatever happens in it.
func killOperator(t *testing.T) {
	t.Helper()
	Expect(env.operator.kill()).To(Succeed())
	Expect(env.operator.exitError()).To(MatchError(ContainSubstring("signal: killed")))
	t.Cleanup(func() {
		if env.operator.exitError() != nil {
			_ = env.operator.start()
		}
	})
}

// TestOperatorKilledMidInstall kills the operator with SIGKILL while an
// install is half done (two modules Ready, two installed and waiting, two
// just added) and starts a new process: the install completes, with the same
// Manifests and every object the first process had installed untouched.
func TestOperatorKilledMidInstall(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	env.gates.set(true, gatedRange(0, 2)...)
	env.gates.set(false, gatedRange(2, 6)...)
	k := newKyma(t, "killed-mid-install", env.runtimes[mainRuntime], modules(gatedRange(0, 4)...)...)
	k.eventuallyMidInstall(gatedRange(0, 2), gatedRange(2, 4))
	manifests := k.manifests(Default, gatedRange(0, 4)...)
	objects := k.runtimeObjects(Default)
	expectObjectsOf(Default, objects, gatedRange(0, 4)...)

	k.addModules(gatedRange(4, 6)...)
	killOperator(t)
	env.gates.set(true, gatedRange(2, 6)...)
	Expect(env.operator.start()).To(Succeed())

	k.eventuallyReady(gatedRange(0, 6)...)
	k.expectSameManifests(manifests, gatedRange(0, 6)...)
	after := k.runtimeObjects(Default)
	expectNoneDeleted(objects, after)
	expectObjectsOf(Default, after, gatedRange(0, 6)...)
}

// TestOperatorKilledMidDelete deletes a Kyma whose module operators hold
// three of six modules (their custom resources keep a finalizer), kills the
// operator with SIGKILL once the other three are removed, lets the module
// operators finish and starts a new process: the deletion completes and
// nothing of the modules is left in the runtime.
func TestOperatorKilledMidDelete(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	ctx := context.Background()
	env.gates.set(true, gatedRange(0, 6)...)
	k := newKyma(t, "killed-mid-delete", env.runtimes[mainRuntime], modules(gatedRange(0, 6)...)...)
	k.eventuallyReady(gatedRange(0, 6)...)

	env.gates.set(false, gatedRange(3, 6)...)
	Expect(env.kcpClient.Delete(ctx, k.get(Default))).To(Succeed())
	// Half removed: the free modules' Manifests and objects are gone, the
	// held ones wait for their module operator.
	Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateDeleting), testenv.DescribeKyma(kyma))
		k.manifests(g, gatedRange(3, 6)...)
		objects := k.runtimeObjects(g)
		expectNoObjectsOf(g, objects, gatedRange(0, 3)...)
		for _, n := range gatedRange(3, 6) {
			g.Expect(objects).To(HaveKey(gatedCRKey(n)), "module %s waits for its operator", n)
		}
	}, timeout, interval).Should(Succeed())

	killOperator(t)
	env.gates.set(true, gatedRange(3, 6)...)
	Expect(env.operator.start()).To(Succeed())

	Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, &v1beta2.Kyma{}))
	}, timeout, interval).Should(BeTrue(), "the Kyma is deleted")
	k.expectNothingLeft(Default)
}

package e2e

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// TestRemoteRuntimeReplacedWithEmptyServer replaces a runtime's API server
// with an empty one at the same address, under the same Secret, while the
// operator does not look (the Kyma is paused), so that no connection error
// tells it. What it remembers of the runtime (CRDs applied, catalog copied)
// is then false: the runtime must get its CRDs, its own Kyma, the catalog
// and its modules back, and the Kyma must become Ready again.
func TestRemoteRuntimeReplacedWithEmptyServer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Sample), module(samplemodules.Evolving))
	k.eventuallyReady(t)
	g.Eventually(func(g Gomega) { k.expectSynced(g, k.runtime) }, timeout, interval).Should(Succeed())

	k.pause(t)

	g.Expect(k.runtime.cluster.ReplaceWithEmpty(ctx)).To(Succeed())
	err := k.runtime.client.Get(ctx, client.ObjectKey{Name: kyma.RuntimeCRDs[0]}, &apiextensionsv1.CustomResourceDefinition{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the new API server is empty: %v", err)

	k.update(t, func(kyma *v1beta2.Kyma) { delete(kyma.Labels, v1beta2.SkipReconciliationLabel) })
	g.Eventually(func(g Gomega) { k.expectSynced(g, k.runtime) }, timeout, interval).Should(Succeed())
	k.eventuallyReady(t)
}

// TestRemoteSecretMovedToAnotherRuntime points a Kyma's Secret at another
// runtime. That is a new runtime: nothing the operator remembers of the old
// one may be taken for the new one's, so the new runtime gets the CRDs, its
// own Kyma, the catalog and the modules at once, without the Kyma reporting
// the runtime unusable on the way.
func TestRemoteSecretMovedToAnotherRuntime(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Sample), module(samplemodules.Evolving))
	k.eventuallyReady(t)
	g.Eventually(func(g Gomega) { k.expectSynced(g, k.runtime) }, timeout, interval).Should(Succeed())

	// The second runtime of the pool; the first one, left behind with
	// everything on it, is wiped and goes back to the pool clean.
	old, moved := k.runtime, <-env.runtimes
	k.runtime = moved
	t.Cleanup(func() {
		g.Expect(old.cluster.ReplaceWithEmpty(context.Background())).To(Succeed())
		env.runtimes <- old
	})

	reasons := watchReadyReasons(t, k.name)
	secret := &corev1.Secret{}
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-kubeconfig"}, secret)).To(Succeed())
	secret.Data["config"] = moved.cluster.Kubeconfig()
	g.Expect(env.kcpClient.Update(ctx, secret)).To(Succeed())

	g.Eventually(func(g Gomega) { k.expectSynced(g, moved) }, timeout, interval).Should(Succeed())
	k.eventuallyReady(t)
	g.Expect(reasons()).NotTo(ContainElement(kyma.ReasonRuntimeUnavailable),
		"the new runtime was usable at once; a memo of the old one made the operator fail on it")
}

// expectSynced checks that rt has what the operator puts into the Kyma's
// runtime: the CRDs, the runtime's own Kyma, the catalog copies, and the
// modules' resources (the sample module's CRD, manager and default CR, the
// evolving module's ConfigMap), ready.
func (k *testKyma) expectSynced(g Gomega, rt *runtimeHandle) {
	ctx := context.Background()
	for _, name := range kyma.RuntimeCRDs {
		g.Expect(rt.client.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), name)
	}
	inSyncNamespace := func(obj client.Object, name string) error {
		return rt.client.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: name}, obj)
	}
	runtimeKyma := &v1beta2.Kyma{}
	g.Expect(inSyncNamespace(runtimeKyma, v1beta2.DefaultRuntimeKymaName)).To(Succeed(), "the runtime's own Kyma")
	g.Expect(runtimeKyma.Finalizers).To(ContainElement(v1beta2.KymaFinalizer))
	g.Expect(inSyncNamespace(&v1beta2.ModuleTemplate{}, "sample-1.0.0")).To(Succeed(), "the catalog's templates")
	g.Expect(inSyncNamespace(&v1beta2.ModuleReleaseMeta{}, samplemodules.Evolving)).To(Succeed(), "the catalog's release metas")

	g.Expect(inSyncNamespace(&corev1.ConfigMap{}, "evolving-config")).To(Succeed())
	deployment := &appsv1.Deployment{}
	g.Expect(inSyncNamespace(deployment, "sample-manager")).To(Succeed())
	g.Expect(deployment.Labels).To(HaveKeyWithValue(v1beta2.KymaNameLabel, k.name))
	g.Expect(deployment.Status.AvailableReplicas).To(BeEquivalentTo(1))
	sample := &unstructured.Unstructured{}
	sample.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
	g.Expect(inSyncNamespace(sample, "default")).To(Succeed())
	state, _, _ := unstructured.NestedString(sample.Object, "status", "state")
	g.Expect(state).To(Equal("Ready"))
}

// watchReadyReasons records the reason of every Ready condition the named
// Kyma shows from now until the end of the test, through a watch, so that
// no state is missed between two polls. It returns the reasons seen so far.
func watchReadyReasons(t *testing.T, name string) func() []string {
	t.Helper()
	g := NewWithT(t)
	wc, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &v1beta2.KymaList{}, client.InNamespace(kcpNamespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	g.Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	var reasons []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for event := range w.ResultChan() {
			if k, ok := event.Object.(*v1beta2.Kyma); ok {
				if c := meta.FindStatusCondition(k.Status.Conditions, kyma.ConditionReady); c != nil {
					mu.Lock()
					reasons = append(reasons, c.Reason)
					mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reasons...)
	}
}

package isolation

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

const (
	timeout  = 90 * time.Second
	interval = 100 * time.Millisecond
)

// testKyma is a Kyma of one test and the Secret that registers its runtime.
type testKyma struct {
	name string
	// kubeconfig is the runtime's real kubeconfig, put back before the
	// Kyma is deleted so that removal can reach the runtime.
	kubeconfig []byte
}

// newKyma registers a Kyma whose Secret holds secretConfig (which may be a
// hostile kubeconfig), for the runtime whose real kubeconfig is
// realConfig. An empty syncNamespace uses the operator's. On cleanup the
// Secret gets the real kubeconfig back, the Kyma is deleted and must go.
func newKyma(t *testing.T, name string, realConfig, secretConfig []byte, syncNamespace string, modules ...string) *testKyma {
	t.Helper()
	ctx := context.Background()
	k := &testKyma{name: name, kubeconfig: realConfig}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-kubeconfig", Namespace: kcpNamespace,
			Labels: map[string]string{v1beta2.KymaNameLabel: name},
		},
		Data: map[string][]byte{"config": secretConfig},
	}
	if err := env.kcpClient.Create(ctx, secret); err != nil {
		t.Fatalf("registering runtime: %v", err)
	}
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: name}},
		Spec:       v1beta2.KymaSpec{Channel: "regular", SyncNamespace: syncNamespace},
	}
	for _, m := range modules {
		kyma.Spec.Modules = append(kyma.Spec.Modules, v1beta2.Module{Name: m, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete})
	}
	if err := env.kcpClient.Create(ctx, kyma); err != nil {
		t.Fatalf("creating Kyma: %v", err)
	}
	t.Cleanup(func() { k.release(t) })
	return k
}

// setKubeconfig replaces the kubeconfig in the Kyma's Secret.
func (k *testKyma) setKubeconfig(t *testing.T, config []byte) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		secret := &corev1.Secret{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-kubeconfig"}, secret)).To(Succeed())
		secret.Data["config"] = config
		g.Expect(env.kcpClient.Update(context.Background(), secret)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func (k *testKyma) release(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	k.setKubeconfig(t, k.kubeconfig)
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}}
	g.Expect(client.IgnoreNotFound(env.kcpClient.Delete(ctx, kyma))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, timeout, interval).Should(BeTrue(), "Kyma %s was not deleted: %s", k.name, describe(kyma))
	g.Expect(env.kcpClient.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kcpNamespace),
		client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
}

func (k *testKyma) get(g Gomega) *v1beta2.Kyma {
	kyma := &v1beta2.Kyma{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, kyma)).To(Succeed())
	return kyma
}

// readyCondition returns the Kyma's Ready condition, failing g without one.
func readyCondition(g Gomega, kyma *v1beta2.Kyma) metav1.Condition {
	cond := meta.FindStatusCondition(kyma.Status.Conditions, "Ready")
	g.Expect(cond).NotTo(BeNil(), "no Ready condition: %s", describe(kyma))
	return *cond
}

// manifests lists the Kyma's Manifests.
func (k *testKyma) manifests(g Gomega) []v1beta2.Manifest {
	list := &v1beta2.ManifestList{}
	g.Expect(env.kcpClient.List(context.Background(), list, client.InNamespace(kcpNamespace),
		client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
	return list.Items
}

func describe(kyma *v1beta2.Kyma) string { return testenv.DescribeKyma(kyma) }

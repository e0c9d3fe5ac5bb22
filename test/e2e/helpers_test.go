package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	kymactrl "github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

const (
	timeout  = 90 * time.Second
	interval = 100 * time.Millisecond
)

// runtimeHandle is one shared kwok runtime.
type runtimeHandle struct {
	name    string
	cluster *testcluster.Runtime
	client  client.Client
}

func newRuntimeHandle(name string, r *testcluster.Runtime) (*runtimeHandle, error) {
	c, err := testenv.NewClient(r.Config())
	if err != nil {
		return nil, err
	}
	return &runtimeHandle{name: name, cluster: r, client: c}, nil
}

// testKyma is a Kyma of one test, bound to a runtime it holds alone.
type testKyma struct {
	name    string
	runtime *runtimeHandle
}

// newKyma takes a runtime from the pool, registers it under a new Kyma with
// the given modules and returns it. At the end of the test the Kyma is
// deleted, which must uninstall everything, and the runtime goes back.
func newKyma(t *testing.T, modules ...v1beta2.Module) *testKyma {
	t.Helper()
	return newKymaWithLabels(t, nil, modules...)
}

// newKymaWithLabels is newKyma with extra labels on the Kyma.
func newKymaWithLabels(t *testing.T, labels map[string]string, modules ...v1beta2.Module) *testKyma {
	t.Helper()
	ctx := context.Background()
	rt := <-env.runtimes
	name := kymaNameOf(t)
	k := &testKyma{name: name, runtime: rt}

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-kubeconfig", Namespace: kcpNamespace,
			Labels: map[string]string{v1beta2.KymaNameLabel: name},
		},
		Data: map[string][]byte{"config": rt.cluster.Kubeconfig()},
	}
	if err := env.kcpClient.Create(ctx, secret); err != nil {
		env.runtimes <- rt
		t.Fatalf("registering runtime: %v", err)
	}
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: rt.name}},
		Spec:       v1beta2.KymaSpec{Channel: "regular", Modules: modules},
	}
	for k, v := range labels {
		kyma.Labels[k] = v
	}
	if err := env.kcpClient.Create(ctx, kyma); err != nil {
		env.runtimes <- rt
		t.Fatalf("creating Kyma: %v", err)
	}
	t.Cleanup(func() { k.release(t) })
	return k
}

// kymaNameOf is the name newKyma gives the test's Kyma.
func kymaNameOf(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.TrimRight(name, "-")
}

// release deletes the Kyma, waits until it is gone (which must uninstall its
// modules), and returns the runtime clean to the pool.
func (k *testKyma) release(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	defer func() { env.runtimes <- k.runtime }()
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}}
	g.Expect(client.IgnoreNotFound(env.kcpClient.Delete(ctx, kyma))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, timeout, interval).Should(BeTrue(), "Kyma %s was not deleted: %s", k.name, describe(kyma))
	g.Expect(env.kcpClient.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kcpNamespace),
		client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())

	// Deleting the Kyma uninstalled everything of it from the runtime.
	rc := k.runtime.client
	owned := client.MatchingLabels{v1beta2.KymaNameLabel: k.name}
	configMaps := &corev1.ConfigMapList{}
	g.Expect(rc.List(ctx, configMaps, owned)).To(Succeed())
	g.Expect(configMaps.Items).To(BeEmpty(), "ConfigMaps of the deleted Kyma are left in runtime %s", k.runtime.name)
	deployments := &appsv1.DeploymentList{}
	g.Expect(rc.List(ctx, deployments, owned)).To(Succeed())
	g.Expect(deployments.Items).To(BeEmpty(), "Deployments of the deleted Kyma are left in runtime %s", k.runtime.name)
	g.Expect(apierrors.IsNotFound(rc.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}, &v1beta2.Kyma{}))).
		To(BeTrue(), "the runtime's Kyma is removed with the control plane's")
}

func (k *testKyma) get(g Gomega) *v1beta2.Kyma {
	kyma := &v1beta2.Kyma{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, kyma)).To(Succeed())
	return kyma
}

// update changes the Kyma's spec, retrying on conflicts.
func (k *testKyma) update(t *testing.T, change func(*v1beta2.Kyma)) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		change(kyma)
		g.Expect(env.kcpClient.Update(context.Background(), kyma)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// pause puts the skip-reconciliation label on the Kyma and waits until the
// Kyma says it is paused.
func (k *testKyma) pause(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Labels[v1beta2.SkipReconciliationLabel] = "true" })
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(k.get(g).Status.Conditions, kymactrl.ConditionPaused)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

// eventuallyReady waits until the Kyma is Ready and returns it.
func (k *testKyma) eventuallyReady(t *testing.T) *v1beta2.Kyma {
	t.Helper()
	g := NewWithT(t)
	var kyma *v1beta2.Kyma
	g.Eventually(func(g Gomega) {
		kyma = k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), "Kyma status: %s", describe(kyma))
	}, timeout, interval).Should(Succeed())
	return kyma
}

func (k *testKyma) moduleStatus(g Gomega, name string) v1beta2.ModuleStatus {
	kyma := k.get(g)
	for _, m := range kyma.Status.Modules {
		if m.Name == name {
			return m
		}
	}
	g.Expect(kyma.Status.Modules).To(ContainElement(HaveField("Name", name)))
	return v1beta2.ModuleStatus{}
}

func describe(kyma *v1beta2.Kyma) string { return testenv.DescribeKyma(kyma) }

// module is a Kyma module entry with the API's defaults.
func module(name string) v1beta2.Module {
	return v1beta2.Module{Name: name, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete}
}

// inRuntime reads an object from the Kyma's runtime.
func (k *testKyma) inRuntime(obj client.Object, name string) error {
	return k.runtime.client.Get(context.Background(), client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: name}, obj)
}

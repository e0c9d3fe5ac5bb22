package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	kymactrl "github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// TestKymaStatusReadsAsKstatus walks a Kyma through the states its modules
// can put it in and reads each from the live object the way Flux and Argo
// health checks (kstatus) and `kubectl wait --for=condition=Ready` do.
func TestKymaStatusReadsAsKstatus(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Sample))
	k.eventuallyReady(t)
	k.eventuallyReads(g, status.CurrentStatus, v1beta2.StateReady, kymactrl.ReasonReady)

	// The module's CR reports it is still working: the module is installing.
	k.setSampleState(t, "Processing")
	k.eventuallyReads(g, status.InProgressStatus, v1beta2.StateProcessing, kymactrl.ReasonModulesNotReady)
	g.Expect(reconciling(g, k.get(g))).To(HaveField("Reason", v1beta2.ReasonProgressing))

	// A warning: the Kyma works, and says so.
	k.setSampleState(t, "Warning")
	k.eventuallyReads(g, status.CurrentStatus, v1beta2.StateWarning, v1beta2.ReasonWarning)

	k.setSampleState(t, "")
	k.eventuallyReads(g, status.CurrentStatus, v1beta2.StateReady, kymactrl.ReasonReady)

	// Being deleted, held by a user's custom resource of the module.
	userSample := k.createUserSample(t)
	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	k.eventuallyReads(g, status.TerminatingStatus, v1beta2.StateDeleting, kymactrl.ReasonDeleting)
	g.Expect(k.runtime.client.Delete(ctx, userSample)).To(Succeed())
}

// TestKymaStatusModuleInErrorIsRetried installs a module whose content link
// points at a layer nobody pushed: the Kyma is Error, and kstatus reads it
// as work in progress that is being retried, not as failed for good.
func TestKymaStatusModuleInErrorIsRetried(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const name = "status-broken-link"
	content := goodManifest(name, "1.0.0")
	sum := sha256.Sum256(content)
	link := fmt.Sprintf("oci://%s/modules/%s@sha256:%s", env.registry.Host(), name, hex.EncodeToString(sum[:]))
	template := samplemodules.Version{Module: name, Version: "1.0.0"}.Template(kcpNamespace, map[string]string{v1beta2.RawManifestResourceName: link})
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})

	k := newKyma(t, module(name))
	k.eventuallyReads(g, status.InProgressStatus, v1beta2.StateError, kymactrl.ReasonModulesFailed)
	kyma := k.get(g)
	g.Expect(reconciling(g, kyma)).To(HaveField("Reason", v1beta2.ReasonProgressingWithRetry))
	g.Expect(meta.FindStatusCondition(kyma.Status.Conditions, v1beta2.ConditionStalled)).To(BeNil(), "a module in Error is retried, not Stalled")
	g.Expect(k.moduleStatus(g, name)).To(And(HaveField("State", v1beta2.StateError), HaveField("Message", ContainSubstring("404 Not Found"))))
}

// TestKymaStatusKubeconfigRefusedIsFailed swaps the runtime's kubeconfig for
// one with an exec plugin: the Kyma is Stalled (kstatus Failed) with a
// message naming the Secret and the field, until the Secret is fixed.
func TestKymaStatusKubeconfigRefusedIsFailed(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	secret := &corev1.Secret{}
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-kubeconfig"}, secret)).To(Succeed())
	good := secret.Data["config"]
	secret.Data["config"] = withExecPlugin(t, good)
	g.Expect(env.kcpClient.Update(ctx, secret)).To(Succeed())
	defer func() {
		// Fixing the Secret is what lets the Kyma go on (and be deleted).
		g.Eventually(func(g Gomega) {
			g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
			secret.Data["config"] = good
			g.Expect(env.kcpClient.Update(ctx, secret)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		k.eventuallyReads(g, status.CurrentStatus, v1beta2.StateReady, kymactrl.ReasonReady)
	}()

	k.eventuallyReads(g, status.FailedStatus, v1beta2.StateError, kymactrl.ReasonKubeconfigRefused)
	stalled := meta.FindStatusCondition(k.get(g).Status.Conditions, v1beta2.ConditionStalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Message).To(And(ContainSubstring(secret.Name), ContainSubstring("exec")), "the message names the Secret and the refused field")
}

// TestModuleRemovalBlockedStaysListed drops a module whose removal a user's
// custom resource blocks: the module stays in the Kyma's status as Deleting,
// naming the resource, and the Kyma is not Ready until the resource is gone.
func TestModuleRemovalBlockedStaysListed(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Sample), module(samplemodules.Evolving))
	k.eventuallyReady(t)
	userSample := k.createUserSample(t)

	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Modules = []v1beta2.Module{module(samplemodules.Evolving)} })
	stuck := func(g Gomega) {
		m := k.moduleStatus(g, samplemodules.Sample)
		g.Expect(m.State).To(Equal(v1beta2.StateDeleting))
		g.Expect(m.Message).To(ContainSubstring("Sample kyma-system/users-own"))
		kyma := k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateProcessing), describe(kyma))
		g.Expect(meta.IsStatusConditionTrue(kyma.Status.Conditions, kymactrl.ConditionReady)).To(BeFalse(), "a stuck uninstall is not Ready")
		g.Expect(k.kstatus(g).Status).To(Equal(status.InProgressStatus))
	}
	g.Eventually(stuck, timeout, interval).Should(Succeed())
	g.Consistently(stuck, "3s", interval).Should(Succeed())

	g.Expect(k.runtime.client.Delete(ctx, userSample)).To(Succeed())
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.Modules).To(ConsistOf(HaveField("Name", samplemodules.Evolving)))
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), describe(kyma))
		g.Expect(apierrors.IsNotFound(env.kcpClient.Get(ctx,
			client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-" + samplemodules.Sample}, &v1beta2.Manifest{}))).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

// TestPausedKymaCanBeDeleted pauses a Kyma with an installed module and
// deletes it: the deletion runs through the pause, and nothing of it is
// left in the runtime.
func TestPausedKymaCanBeDeleted(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)
	k.pause(t)

	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, &v1beta2.Kyma{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the paused Kyma is deleted")
	}, timeout, interval).Should(Succeed())
	configMaps := &corev1.ConfigMapList{}
	g.Expect(k.runtime.client.List(ctx, configMaps, client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
	g.Expect(configMaps.Items).To(BeEmpty(), "the paused Kyma's module is removed from the runtime")
	g.Expect(apierrors.IsNotFound(k.inRuntime(&v1beta2.Kyma{}, v1beta2.DefaultRuntimeKymaName))).To(BeTrue(), "the runtime's Kyma is removed")
}

// TestKymaStatusObservedGenerationWaitsForTheRuntime changes the spec while
// the runtime is unreachable: observedGeneration stays at the generation
// last processed until the runtime is back and the new spec is processed.
func TestKymaStatusObservedGenerationWaitsForTheRuntime(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Evolving))
	processed := k.eventuallyReady(t).Status.ObservedGeneration

	g.Expect(k.runtime.cluster.StopAPIServer()).To(Succeed())
	restarted := false
	defer func() {
		if !restarted {
			_ = k.runtime.cluster.StartAPIServer(context.Background())
		}
	}()
	k.eventuallyReads(g, status.InProgressStatus, v1beta2.StateError, kymactrl.ReasonRuntimeUnavailable)
	kyma := k.get(g)
	g.Expect(reconciling(g, kyma)).To(HaveField("Reason", v1beta2.ReasonProgressingWithRetry))
	ready := meta.FindStatusCondition(kyma.Status.Conditions, kymactrl.ConditionReady)
	g.Expect(ready.Message).To(ContainSubstring("connection failed"))
	g.Expect(ready.Message).NotTo(Or(ContainSubstring("connection refused"), ContainSubstring("127.0.0.1")), "no raw error text in a condition")

	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Debug = ptr.To(false) })
	g.Consistently(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Generation).To(BeNumerically(">", processed))
		g.Expect(kyma.Status.ObservedGeneration).To(Equal(processed), "the new spec was not processed: %s", describe(kyma))
		g.Expect(k.kstatus(g).Status).To(Equal(status.InProgressStatus))
	}, "3s", interval).Should(Succeed())

	g.Expect(k.runtime.cluster.StartAPIServer(context.Background())).To(Succeed())
	restarted = true
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), describe(kyma))
		g.Expect(kyma.Status.ObservedGeneration).To(Equal(kyma.Generation))
	}, timeout, interval).Should(Succeed())
}

// eventuallyReads waits until the live Kyma reads as want to kstatus, with
// the state and the Ready reason given, and `kubectl wait
// --for=condition=Ready` passes exactly when kstatus says Current.
func (k *testKyma) eventuallyReads(g Gomega, want status.Status, state v1beta2.State, readyReason string) {
	g.Eventually(func(g Gomega) {
		res := k.kstatus(g)
		kyma := k.get(g)
		g.Expect(res.Status).To(Equal(want), "kstatus %s (%s); Kyma %s", res.Status, res.Message, describe(kyma))
		g.Expect(kyma.Status.State).To(Equal(state))
		ready := meta.FindStatusCondition(kyma.Status.Conditions, kymactrl.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(readyReason))
		g.Expect(kubectlWaitReady(kyma)).To(Equal(want == status.CurrentStatus))
	}, timeout, interval).Should(Succeed())
}

// kstatus reads the Kyma from the API server as unstructured and computes
// its kstatus, as Flux's and Argo's health checks do.
func (k *testKyma) kstatus(g Gomega) *status.Result {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("Kyma"))
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, u)).To(Succeed())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	return res
}

// kubectlWaitReady is what `kubectl wait --for=condition=Ready` checks.
func kubectlWaitReady(kyma *v1beta2.Kyma) bool {
	return meta.IsStatusConditionTrue(kyma.Status.Conditions, kymactrl.ConditionReady)
}

func reconciling(g Gomega, kyma *v1beta2.Kyma) *metav1.Condition {
	c := meta.FindStatusCondition(kyma.Status.Conditions, v1beta2.ConditionReconciling)
	g.Expect(c).NotTo(BeNil(), "Reconciling condition: %s", describe(kyma))
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	return c
}

// setSampleState makes the sample module's operator report state for the
// module's default CR; empty means Ready.
func (k *testKyma) setSampleState(t *testing.T, state string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
		g.Expect(k.inRuntime(cr, "default")).To(Succeed())
		labels := cr.GetLabels()
		if state == "" {
			delete(labels, samplemodules.StateLabel)
		} else {
			labels[samplemodules.StateLabel] = state
		}
		cr.SetLabels(labels)
		g.Expect(k.runtime.client.Update(context.Background(), cr)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// createUserSample creates a custom resource of the sample module's CRD
// that is the runtime owner's, not the module's: it blocks the module's
// removal until its owner deletes it.
func (k *testKyma) createUserSample(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	userSample := &unstructured.Unstructured{}
	userSample.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
	userSample.SetName("users-own")
	userSample.SetNamespace(v1beta2.DefaultRuntimeNamespace)
	g.Expect(k.runtime.client.Create(context.Background(), userSample)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(k.runtime.client.Delete(context.Background(), userSample)) })
	return userSample
}

// withExecPlugin is kubeconfig with an exec plugin added to its user, which
// the operator refuses.
func withExecPlugin(t *testing.T, kubeconfig []byte) []byte {
	t.Helper()
	g := NewWithT(t)
	cfg, err := clientcmd.Load(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, user := range cfg.AuthInfos {
		user.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "true", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	}
	out, err := clientcmd.Write(*cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

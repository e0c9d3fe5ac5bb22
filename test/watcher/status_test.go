package watcher

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	watcherctrl "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
)

// A Watcher's conditions read right in kstatus (Flux's and Argo's health
// checks) and `kubectl wait --for=condition=Ready`, on the live object: a
// valid Watcher is Current and Ready; edited into one the runtimes' API
// servers would refuse, it is Failed (Stalled=True, reason Invalid) for the
// new generation, with a message naming the field and the fix; fixed, it is
// Current again.
func TestWatcherConditionsReadAsKstatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "kstatus", Namespace: kcpNamespace},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "lifecycle-manager-listener", Namespace: kcpNamespace, Port: 8443},
			LabelsToWatch:   map[string]string{"watcher-test-kstatus": "yes"},
			ResourceToWatch: v1beta2.WatchableGVR{Version: "v1", Resource: "configmaps"},
			Field:           v1beta2.SpecField,
		},
	}
	g.Expect(env.kcpClient.Create(ctx, w)).To(Succeed())
	defer func() { _ = env.kcpClient.Delete(ctx, w) }()

	expectCurrent := func(g Gomega) {
		live, res := liveWatcher(g, w)
		g.Expect(res.Status).To(Equal(status.CurrentStatus), res.Message)
		g.Expect(live.Status.State).To(Equal(v1beta2.StateReady))
		g.Expect(meta.IsStatusConditionTrue(live.Status.Conditions, v1beta2.ConditionReady)).To(BeTrue())
		g.Expect(meta.FindStatusCondition(live.Status.Conditions, v1beta2.ConditionStalled)).To(BeNil())
		g.Expect(meta.FindStatusCondition(live.Status.Conditions, v1beta2.ConditionReady).Reason).To(Equal(watcherctrl.ReasonInUse))
	}
	g.Eventually(expectCurrent, timeout, interval).Should(Succeed())

	edit := func(labels map[string]string) {
		g.Eventually(func(g Gomega) {
			g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
			w.Spec.LabelsToWatch = labels
			g.Expect(env.kcpClient.Update(ctx, w)).To(Succeed())
		}, timeout, interval).Should(Succeed())
	}
	edit(map[string]string{"not a label key": "yes"})
	g.Eventually(func(g Gomega) {
		live, res := liveWatcher(g, w)
		g.Expect(live.Generation).To(BeNumerically(">", 1))
		g.Expect(res.Status).To(Equal(status.FailedStatus), res.Message)
		g.Expect(live.Status.State).To(Equal(v1beta2.StateError))
		// kubectl wait --for=condition=Ready would keep waiting.
		g.Expect(meta.IsStatusConditionTrue(live.Status.Conditions, v1beta2.ConditionReady)).To(BeFalse())
		stalled := meta.FindStatusCondition(live.Status.Conditions, v1beta2.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(watcherctrl.ReasonInvalid))
		g.Expect(stalled.Message).To(And(ContainSubstring(`labelsToWatch key "not a label key"`), ContainSubstring("Fix the spec")))
	}, timeout, interval).Should(Succeed())

	edit(map[string]string{"watcher-test-kstatus": "again"})
	g.Eventually(expectCurrent, timeout, interval).Should(Succeed())
}

// liveWatcher reads w from the API server, typed and as kstatus sees it.
func liveWatcher(g Gomega, w *v1beta2.Watcher) (*v1beta2.Watcher, *status.Result) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("Watcher"))
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(w), u)).To(Succeed())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	live := &v1beta2.Watcher{}
	g.Expect(env.kcpClient.Scheme().Convert(u, live, nil)).To(Succeed())
	return live, res
}

// The agent controller writes nothing into the Kyma's status, which the Kyma
// controller owns: a runtime whose kubeconfig is refused is a Warning event
// on the Kyma (reason WatcherKubeconfigRefused, the raw error in the note)
// and no retry until the Secret changes; fixing the Secret brings the
// watcher, and the Kyma's deletion removes it.
func TestAgentFailureIsAnEventNotAKymaCondition(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name, ns := "refused", "watcher-refused"
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": []byte("this is not a kubeconfig")},
	}
	g.Expect(env.kcpClient.Create(ctx, secret)).To(Succeed())
	defer func() { _ = env.kcpClient.Delete(ctx, secret) }()
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: "rt-" + name}},
		// A namespace of its own, as it shares the runtime API server.
		Spec: v1beta2.KymaSpec{Channel: "regular", SyncNamespace: ns},
	}
	g.Expect(env.kcpClient.Create(ctx, kyma)).To(Succeed())
	t.Cleanup(func() {
		// A failed run must not leave the Kyma to the next one (-count).
		_ = env.kcpClient.Delete(ctx, kyma)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), &v1beta2.Kyma{}))
		}, timeout, interval).Should(BeTrue())
	})

	g.Eventually(func(g Gomega) {
		found, err := testenv.Events(ctx, env.kcpClient, "Kyma", kyma, watcherctrl.ReasonKubeconfigRefused)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).NotTo(BeEmpty())
		g.Expect(found[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(found[0].Note).To(ContainSubstring("invalid runtime kubeconfig"))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma)).To(Succeed())
	g.Expect(kyma.Finalizers).To(ContainElement(v1beta2.WatcherFinalizer))
	for _, c := range kyma.Status.Conditions {
		if c.Type == v1beta2.ConditionWatcherReporting {
			continue // the Kyma controller's liveness condition (liveness_test.go), not the agent controller's
		}
		g.Expect(strings.HasPrefix(c.Reason, "Watcher")).To(BeFalse(), "the agent controller wrote condition %+v into the Kyma's status", c)
	}

	// Fixing the Secret (a watched input) brings the watcher.
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	secret.Data = map[string][]byte{"config": env.runtime.Kubeconfig()}
	g.Expect(env.kcpClient.Update(ctx, secret)).To(Succeed())
	webhook := client.ObjectKey{Name: "runtime-watcher-" + ns}
	g.Eventually(func() error {
		return env.rtClient.Get(ctx, webhook, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	}, timeout, interval).Should(Succeed())

	g.Expect(env.kcpClient.Delete(ctx, kyma)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, timeout, interval).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(env.rtClient.Get(ctx, webhook, &admissionregistrationv1.ValidatingWebhookConfiguration{}))).To(BeTrue())
}

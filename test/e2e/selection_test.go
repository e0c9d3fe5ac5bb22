package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// TestKymaOutsideSelectionIsUntouched checks R13: a Kyma the operator's
// selector excludes gets no finalizer, no status, no Manifest, and nothing in
// its runtime.
func TestKymaOutsideSelectionIsUntouched(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKymaWithLabels(t, map[string]string{excludedLabel: "true"}, module(samplemodules.Evolving))

	g.Consistently(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Finalizers).To(BeEmpty())
		g.Expect(kyma.Status.State).To(BeEmpty())
		manifests := &v1beta2.ManifestList{}
		g.Expect(env.kcpClient.List(context.Background(), manifests, client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
		g.Expect(manifests.Items).To(BeEmpty())
		g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, "evolving-config"))).To(BeTrue())
	}, "3s", interval).Should(Succeed())

	// Brought into the selection, it is managed like any other.
	k.update(t, func(kyma *v1beta2.Kyma) { delete(kyma.Labels, excludedLabel) })
	k.eventuallyReady(t)
}

// TestPauseAndResume checks G3: a paused Kyma says so, its runtime is not
// touched (drift stays), and resuming corrects the drift.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	k.pause(t)

	g.Expect(k.runtime.client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "evolving-config", Namespace: v1beta2.DefaultRuntimeNamespace}})).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, "evolving-config"))).To(BeTrue(), "nothing is done while paused")
	}, "3s", interval).Should(Succeed())

	k.update(t, func(kyma *v1beta2.Kyma) { delete(kyma.Labels, v1beta2.SkipReconciliationLabel) })
	g.Eventually(func(g Gomega) {
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, "evolving-config")).To(Succeed(), "drift made while paused is corrected")
		kyma := k.get(g)
		g.Expect(meta.FindStatusCondition(kyma.Status.Conditions, "Paused")).To(BeNil())
	}, timeout, interval).Should(Succeed())
	k.eventuallyReady(t)
}

// TestPausedGroup pauses through the operator's pause selector.
func TestPausedGroup(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKymaWithLabels(t, map[string]string{pausedGroupLabel: "yes"}, module(samplemodules.Evolving))
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(k.get(g).Status.Conditions, kyma.ConditionPaused)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, "evolving-config"))).To(BeTrue())
	}, "2s", interval).Should(Succeed())

	k.update(t, func(kyma *v1beta2.Kyma) { delete(kyma.Labels, pausedGroupLabel) })
	k.eventuallyReady(t)
}

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/catalog"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

func (k *testKyma) runtimeTemplate(name string) (*v1beta2.ModuleTemplate, error) {
	t := &v1beta2.ModuleTemplate{}
	err := k.runtime.client.Get(context.Background(), client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: name}, t)
	return t, err
}

// TestCatalogIsCopiedToRuntimes checks R8: templates and release metas reach
// the runtime, edits there are overwritten, deletions in the control plane
// reach it, and beta templates go only to runtimes labelled for them.
func TestCatalogIsCopiedToRuntimes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)

	g.Eventually(func(g Gomega) {
		_, err := k.runtimeTemplate("sample-1.0.0")
		g.Expect(err).NotTo(HaveOccurred())
		meta := &v1beta2.ModuleReleaseMeta{}
		g.Expect(k.runtime.client.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: "evolving"}, meta)).To(Succeed())
		g.Expect(meta.Spec.Channels).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())

	// An edit in the runtime is overwritten.
	g.Eventually(func(g Gomega) {
		copied, err := k.runtimeTemplate("sample-1.0.0")
		g.Expect(err).NotTo(HaveOccurred())
		copied.Spec.Info.Repository = "https://example.invalid/tampered"
		g.Expect(k.runtime.client.Update(ctx, copied)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		copied, err := k.runtimeTemplate("sample-1.0.0")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(copied.Spec.Info.Repository).NotTo(ContainSubstring("tampered"))
	}, timeout, interval).Should(Succeed())

	// A new template appears; a deleted one goes.
	extra := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "catalog-extra-1.0.0", Namespace: kcpNamespace},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: "catalog-extra", Version: "1.0.0"},
	}
	g.Expect(env.kcpClient.Create(ctx, extra)).To(Succeed())
	g.Eventually(func() error { _, err := k.runtimeTemplate(extra.Name); return err }, timeout, interval).Should(Succeed())
	g.Expect(env.kcpClient.Delete(ctx, extra)).To(Succeed())
	g.Eventually(func() bool { _, err := k.runtimeTemplate(extra.Name); return apierrors.IsNotFound(err) }, timeout, interval).Should(BeTrue())

	// A beta template only reaches runtimes whose Kyma is labelled beta.
	beta := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "catalog-beta-1.0.0", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.BetaLabel: "true"}},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: "catalog-beta", Version: "1.0.0"},
	}
	g.Expect(env.kcpClient.Create(ctx, beta)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, beta) })
	g.Consistently(func() bool { _, err := k.runtimeTemplate(beta.Name); return apierrors.IsNotFound(err) }, "2s", interval).Should(BeTrue())
	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Labels[v1beta2.BetaLabel] = "true" })
	g.Eventually(func() error { _, err := k.runtimeTemplate(beta.Name); return err }, timeout, interval).Should(Succeed())
}

// TestCatalogFailureIsAWarningEvent: the catalog sync has no status of its
// own and writes none into the Kyma's (the Kyma controller owns it); a
// runtime it cannot use is a Warning event on the Kyma, reason
// CatalogRuntimeUnavailable, with the raw error in the note.
func TestCatalogFailureIsAWarningEvent(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	name := "catalog-refused"
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": []byte("this is not a kubeconfig")},
	}
	g.Expect(env.kcpClient.Create(ctx, secret)).To(Succeed())
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace},
		Spec:       v1beta2.KymaSpec{Channel: "regular"},
	}
	g.Expect(env.kcpClient.Create(ctx, kyma)).To(Succeed())
	t.Cleanup(func() {
		// Without its Secret the runtime counts as gone, so the Kyma goes.
		_ = env.kcpClient.Delete(ctx, secret)
		_ = env.kcpClient.Delete(ctx, kyma)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), &v1beta2.Kyma{}))
		}, timeout, interval).Should(BeTrue())
	})

	g.Eventually(func(g Gomega) {
		found, err := testenv.Events(ctx, env.kcpClient, "Kyma", kyma, catalog.ReasonRuntimeUnavailable)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).NotTo(BeEmpty())
		g.Expect(found[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(found[0].Note).To(ContainSubstring("invalid runtime kubeconfig"))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma)).To(Succeed())
	for _, c := range kyma.Status.Conditions {
		g.Expect(c.Reason).NotTo(HavePrefix("Catalog"), "the catalog sync wrote %+v into the Kyma's status", c)
	}
}

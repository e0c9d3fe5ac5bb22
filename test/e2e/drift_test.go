package e2e

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// sampleKinds are the resources of the sample module's content (its CRD
// aside, which the Kyma controller writes too).
var sampleKinds = []string{"deployments", "serviceaccounts", "clusterroles", "clusterrolebindings"}

// requests counts the requests the Kyma's runtime API server has served, by
// its own metrics, whose labels match.
func (k *testKyma) requests(g Gomega, match func(labels map[string]string) bool) float64 {
	total, err := k.runtime.cluster.Requests(context.Background(), match)
	g.Expect(err).NotTo(HaveOccurred())
	return total
}

// moduleApplies are dry-run and real writes of the sample module's kinds.
func moduleApplies(labels map[string]string) bool {
	return slices.Contains(sampleKinds, labels["resource"]) && labels["subresource"] == "" &&
		slices.Contains([]string{"POST", "PUT", "PATCH", "APPLY", "DELETE"}, labels["verb"])
}

// managerReads are reads of the module's manager Deployment: every check of
// the Manifest, full or not, reads its readiness.
func managerReads(labels map[string]string) bool {
	return labels["resource"] == "deployments" && labels["verb"] == "GET" && labels["subresource"] == ""
}

// unchangedChecks counts the periodic checks that found a Manifest's module
// unchanged, without a reconcile.
func unchangedChecks() float64 {
	return counterValue(metrics.ManifestChecks.WithLabelValues(metrics.CheckUnchanged))
}

// TestPeriodicCheckOfUnchangedModuleAppliesNothing lets a Ready module be
// checked several times (the Ready interval is 2s here, and no watcher
// reports): none of the checks dry-runs or writes any of its objects, and
// none needs a reconcile of its Manifest (manifest_checks.go). Then
// drift made in the runtime — a manager's spec edited, a ServiceAccount
// deleted, a ClusterRole's rules changed — is still found by the periodic
// check alone and corrected.
func TestPeriodicCheckOfUnchangedModuleAppliesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Sample))
	k.eventuallyReady(t)
	rc := k.runtime.client

	// The first checks after the install may still apply (the manager's
	// status settles): wait for a check that applied nothing, then count.
	applies, reads := k.requests(g, moduleApplies), k.requests(g, managerReads)
	g.Eventually(func(g Gomega) bool {
		a, r := k.requests(g, moduleApplies), k.requests(g, managerReads)
		if a != applies {
			applies, reads = a, r
			return false
		}
		return r > reads
	}, timeout, interval).Should(BeTrue(), "a check that applies nothing")
	applies, reads = k.requests(g, moduleApplies), k.requests(g, managerReads)
	// This test is not parallel: it runs alone, before the parallel tests
	// start, and the Kymas of the tests before it are gone, so the
	// operator's counters move for this Kyma's Manifest alone.
	reconciles, checks := counterValue(metrics.ManifestReconciles), unchangedChecks()
	g.Eventually(func(g Gomega) {
		g.Expect(k.requests(g, managerReads)).To(BeNumerically(">=", reads+3))
	}, timeout, interval).Should(Succeed(), "three more periodic checks")
	g.Expect(k.requests(g, moduleApplies)).To(Equal(applies),
		"periodic checks of an unchanged module neither dry-run nor write its objects")
	// A check counts itself after its last read, so the count may trail the
	// reads just seen by a moment.
	g.Eventually(unchangedChecks, timeout, interval).Should(BeNumerically(">=", checks+3), "the checks found the module unchanged")
	g.Expect(counterValue(metrics.ManifestReconciles)).To(Equal(reconciles),
		"a check that finds the module unchanged is made without a reconcile of its Manifest")

	// An object's spec edited.
	deployment := &appsv1.Deployment{}
	g.Expect(k.inRuntime(deployment, "sample-manager")).To(Succeed())
	image := deployment.Spec.Template.Spec.Containers[0].Image
	deployment.Spec.Template.Spec.Containers[0].Image = "tampered:1"
	g.Expect(rc.Update(ctx, deployment)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.inRuntime(deployment, "sample-manager")).To(Succeed())
		g.Expect(deployment.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	}, timeout, interval).Should(Succeed(), "the edited manager is restored")

	// An object deleted.
	sa := &corev1.ServiceAccount{}
	g.Expect(k.inRuntime(sa, "sample-manager")).To(Succeed())
	g.Expect(rc.Delete(ctx, sa)).To(Succeed())
	g.Eventually(func(g Gomega) {
		recreated := &corev1.ServiceAccount{}
		g.Expect(k.inRuntime(recreated, "sample-manager")).To(Succeed())
		g.Expect(recreated.UID).NotTo(Equal(sa.UID))
	}, timeout, interval).Should(Succeed(), "the deleted ServiceAccount is created again")

	// A cluster-scoped object changed.
	role := &rbacv1.ClusterRole{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: "sample-manager"}, role)).To(Succeed())
	rules := role.Rules
	role.Rules = nil
	g.Expect(rc.Update(ctx, role)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(rc.Get(ctx, client.ObjectKey{Name: "sample-manager"}, role)).To(Succeed())
		g.Expect(role.Rules).To(Equal(rules))
	}, timeout, interval).Should(Succeed(), "the ClusterRole's rules are restored")
	k.eventuallyReady(t)
}

// TestContentChangeAfterQuietChecksIsApplied moves a module whose periodic
// checks have gone quiet to new content: a new generation is never taken
// for the one verified, and 2.0.0 is applied and pruned in full.
func TestContentChangeAfterQuietChecksIsApplied(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	setChannel(t, samplemodules.Evolving, "drift", "1.0.0")
	evolving := module(samplemodules.Evolving)
	evolving.Channel = "drift"
	k := newKyma(t, evolving)
	k.eventuallyReady(t)

	configMapWrites := func(labels map[string]string) bool {
		return labels["resource"] == "configmaps" && labels["subresource"] == "" && labels["dry_run"] == "" &&
			(labels["verb"] == "APPLY" || labels["verb"] == "PATCH")
	}
	configMapLists := func(labels map[string]string) bool {
		return labels["resource"] == "configmaps" && labels["verb"] == "LIST"
	}
	lists := k.requests(g, configMapLists)
	g.Eventually(func(g Gomega) {
		g.Expect(k.requests(g, configMapLists)).To(BeNumerically(">=", lists+2))
	}, timeout, interval).Should(Succeed(), "the cheap check reads the module's objects")
	patches := k.requests(g, configMapWrites)

	setChannel(t, samplemodules.Evolving, "drift", "2.0.0")
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, samplemodules.Evolving)
		g.Expect(m.Version).To(Equal("2.0.0"))
		g.Expect(m.State).To(Equal(v1beta2.StateReady))
		cm := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(cm, "evolving-config")).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("version", "2.0.0"))
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, "evolving-added-in-2")).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Expect(k.requests(g, configMapWrites)).To(BeNumerically(">", patches), "the new content was applied")
}

// TestDeletedSyncNamespaceComesBack has the runtime's owner delete the sync
// namespace, with the module's objects and the runtime's Kyma in it. The
// operator remembers that the namespace exists and does not read it on
// every reconcile; the first write that fails makes it check afresh, so
// the namespace, the module's objects and the runtime's Kyma come back.
func TestDeletedSyncNamespaceComesBack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	setChannel(t, samplemodules.Evolving, "nsdeleted", "1.0.0")
	evolving := module(samplemodules.Evolving)
	evolving.Channel = "nsdeleted"
	k := newKyma(t, evolving)
	k.eventuallyReady(t)
	rc := k.runtime.client

	deleted := &corev1.Namespace{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: v1beta2.DefaultRuntimeNamespace}, deleted)).To(Succeed())
	g.Expect(rc.Delete(ctx, deleted)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again := &corev1.Namespace{}
		g.Expect(rc.Get(ctx, client.ObjectKey{Name: v1beta2.DefaultRuntimeNamespace}, again)).To(Succeed())
		g.Expect(again.UID).NotTo(Equal(deleted.UID), "the namespace is a new one")
		g.Expect(again.DeletionTimestamp).To(BeNil())
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, "evolving-config")).To(Succeed())
		g.Expect(k.inRuntime(&v1beta2.Kyma{}, v1beta2.DefaultRuntimeKymaName)).To(Succeed())
	}, timeout, interval).Should(Succeed(), "the sync namespace, the module's objects and the runtime's Kyma are back")
	k.eventuallyReady(t)
}

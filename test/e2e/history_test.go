package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/history"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// TestOperationHistory takes one module through an install, an upgrade, a
// drift repair, an upgrade that needs a human (the runtime owner's object
// where the new version wants its own), and its removal, and reads the
// history as lmctl history does: newest first, each with its versions,
// times and result, and Failed told from Error.
func TestOperationHistory(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "journal"
	k := installGood(t, env.registry, name)

	publish(t, env.registry, name, "2.0.0", ociartifact.Module{RawManifest: goodManifest(name, "2.0.0")})
	setChannel(t, name, "regular", "2.0.0")
	expectModuleReadyAt(t, k, name, "2.0.0")

	// Drift: someone deletes the module's ConfigMap; the periodic check
	// puts it back.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: v1beta2.DefaultRuntimeNamespace, Name: name + "-config"}}
	g.Expect(k.runtime.client.Delete(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.inRuntime(&corev1.ConfigMap{}, name+"-config")).To(Succeed())
		g.Expect(operations(g, k.name, name)).To(HaveLen(3))
	}, timeout, interval).Should(Succeed())

	// 3.0.0 ships a ConfigMap that the runtime owner already has: only a
	// person can resolve that.
	owners := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: v1beta2.DefaultRuntimeNamespace, Name: name + "-owners"}}
	g.Expect(k.runtime.client.Create(ctx, owners)).To(Succeed())
	t.Cleanup(func() { _ = k.runtime.client.Delete(ctx, owners) })
	next := append(goodManifest(name, "3.0.0"), []byte("---\n"+configMapYAML("", name+"-owners", "k", "v"))...)
	publish(t, env.registry, name, "3.0.0", ociartifact.Module{RawManifest: next})
	setChannel(t, name, "regular", "3.0.0")

	var entries []history.Entry
	g.Eventually(func(g Gomega) {
		var err error
		entries, err = history.Read(ctx, env.kcpClient, kcpNamespace, k.name, name, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).To(HaveLen(4))
		g.Expect(entries[0].Result).To(Equal(string(v1beta2.OperationFailed)))
	}, timeout, interval).Should(Succeed())
	type row struct{ Type, From, To, Result, Code string }
	rows := make([]row, 0, len(entries))
	for _, e := range entries {
		rows = append(rows, row{e.Type, e.From, e.To, e.Result, e.Code})
		g.Expect(e.Module).To(Equal(name))
		g.Expect(e.StartedAt.IsZero()).To(BeFalse())
	}
	g.Expect(rows).To(Equal([]row{
		{"Upgrade", "2.0.0", "3.0.0", "Failed", manifest.ReasonOwnershipConflict},
		{"DriftRepair", "2.0.0", "2.0.0", "Ready", ""},
		{"Upgrade", "1.0.0", "2.0.0", "Ready", ""},
		{"Install", "", "1.0.0", "Ready", ""},
	}), "newest first")
	g.Expect(entries[0].NeedsHuman).To(BeTrue())
	g.Expect(entries[0].FinishedAt).To(BeNil(), "a Failed upgrade is not over")
	for _, e := range entries[1:] {
		g.Expect(e.FinishedAt).NotTo(BeNil())
		g.Expect(e.FinishedAt.Before(e.StartedAt)).To(BeFalse())
	}

	// Removing the module: the Manifest and its operations go, the Kyma
	// keeps the removal.
	k.update(t, func(ky *v1beta2.Kyma) { ky.Spec.Modules = nil })
	g.Eventually(func(g Gomega) {
		entries, err := history.Read(ctx, env.kcpClient, kcpNamespace, k.name, "", time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).To(HaveLen(1))
		g.Expect(entries[0]).To(And(
			HaveField("Module", name), HaveField("Type", string(v1beta2.OperationRemoval)),
			HaveField("From", "2.0.0"), HaveField("Result", string(v1beta2.OperationReady))))
		g.Expect(entries[0].FinishedAt).NotTo(BeNil())
		g.Expect(k.get(g).Status.Modules).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
}

// operations reads the module's Manifest's operations.
func operations(g Gomega, kymaName, module string) []v1beta2.Operation {
	m := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(kymaName, module)}, m)).To(Succeed())
	return m.Status.Operations
}

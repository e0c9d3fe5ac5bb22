package lmctl_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/klm"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// TestKLMPlanAndStatus runs lmctl klm plan and status as an SRE does, on a
// control plane with a Kyma in the shape KLM leaves it (the facts are
// KLM's at 1.20.4, as internal/takeover names them): the figures and names
// of the plan in JSON and in the table, that planning writes nothing, an
// unknown Kyma, and the status once a Manifest recorded its takeover. The
// control plane is the runtime too, through the Kyma's kubeconfig Secret;
// the runtime's objects are in kyma-system, --sync-namespace's default.
func TestKLMPlanAndStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, rt = "kcp-klm", v1beta2.DefaultRuntimeNamespace
	cp, kcp := controlPlaneWith(t, ns)
	g.Expect(kcp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rt}})).To(Succeed())
	kubeconfig := []string{"-n", ns, "--kubeconfig", cp.KubeconfigPath()}

	// KLM's Kyma, its kubeconfig Secret (the name is KLM's test scripts';
	// KLM finds it by the label), and KLM's Manifest of alpha: it applied
	// alpha-config (its label and owned-by annotation), its record also
	// names the runtime owner's ConfigMap and one that is gone.
	g.Expect(kcp.Create(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k1", Namespace: ns,
		Labels: map[string]string{takeover.Label: "true"}, Finalizers: []string{takeover.KymaFinalizer}},
		Spec: v1beta2.KymaSpec{Channel: "regular"}})).To(Succeed())
	g.Expect(kcp.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k1", Namespace: ns, Labels: map[string]string{v1beta2.KymaNameLabel: "k1"}},
		Data: map[string][]byte{"config": cp.Kubeconfig()}})).To(Succeed())
	klmConfig := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha-config", Namespace: rt,
		Labels:      map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue},
		Annotations: map[string]string{takeover.DeprecatedOwnedByAnnotation: ns + "/k1-alpha-1"}}}
	g.Expect(kcp.Create(ctx, klmConfig, client.FieldOwner(takeover.ApplierManager))).To(Succeed())
	g.Expect(kcp.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owners", Namespace: rt}})).To(Succeed())
	klmManifest := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "k1-alpha-1", Namespace: ns,
		Finalizers: []string{takeover.ManifestFinalizer, takeover.LabelRemovalFinalizer},
		Labels:     map[string]string{v1beta2.KymaNameLabel: "k1", v1beta2.ModuleNameLabel: "alpha", v1beta2.ManagedByLabel: v1beta2.ManagedByValue}},
		Spec: v1beta2.ManifestSpec{Remote: true, Version: "1.2.3"}}
	g.Expect(kcp.Create(ctx, klmManifest)).To(Succeed())
	record := func(name string) v1beta2.Resource {
		return v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: rt, Name: name}
	}
	klmManifest.Status.Synced = []v1beta2.Resource{record("alpha-config"), record("owners"), record("gone")}
	g.Expect(kcp.Status().Update(ctx, klmManifest)).To(Succeed())
	// KLM's agent: its TLS Secret, labelled as KLM labels it.
	g.Expect(kcp.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "skr-webhook-tls", Namespace: rt,
		Labels: map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue}}})).To(Succeed())

	versionsOf := func() []string {
		var out []string
		for _, o := range []struct {
			obj client.Object
			key client.ObjectKey
		}{
			{&v1beta2.Kyma{}, client.ObjectKey{Namespace: ns, Name: "k1"}},
			{&v1beta2.Manifest{}, client.ObjectKey{Namespace: ns, Name: "k1-alpha-1"}},
			{&corev1.ConfigMap{}, client.ObjectKey{Namespace: rt, Name: "alpha-config"}},
			{&corev1.ConfigMap{}, client.ObjectKey{Namespace: rt, Name: "owners"}},
			{&corev1.Secret{}, client.ObjectKey{Namespace: rt, Name: "skr-webhook-tls"}},
		} {
			g.Expect(kcp.Get(ctx, o.key, o.obj)).To(Succeed())
			out = append(out, o.obj.GetResourceVersion())
		}
		return out
	}
	before := versionsOf()

	// The fleet's plan, in JSON.
	stdout, stderr, code := lmctl(t, time.Minute, append([]string{"klm", "plan", "-o", "json"}, kubeconfig...)...)
	g.Expect(code).To(BeZero(), stderr)
	plan := &klm.Plan{}
	g.Expect(json.Unmarshal([]byte(stdout), plan)).To(Succeed(), stdout)
	g.Expect(plan.Totals).To(Equal(klm.Totals{Kymas: 1, Labelled: 1, KLMManifests: 1, TakeOver: 1, Left: 1, Gone: 1}))
	g.Expect(plan.Kymas).To(HaveLen(1))
	k := plan.Kymas[0]
	g.Expect(k.RuntimeError).To(BeEmpty())
	g.Expect(k.CoveredBy).To(Equal([]takeover.Policy{takeover.Labelled, takeover.All}))
	g.Expect(k.KLMFinalizers).To(Equal([]string{takeover.KymaFinalizer}))
	g.Expect(k.Modules).To(HaveLen(1))
	g.Expect(k.Modules[0]).To(Equal(klm.ModulePlan{Module: "alpha", KLMManifest: "k1-alpha-1", Version: "1.2.3",
		TakeOver: 1, Left: []string{"ConfigMap " + rt + "/owners"}, LeftCount: 1, Gone: 1}))
	g.Expect(k.Runtime.Agent).To(Equal([]string{"Secret " + rt + "/skr-webhook-tls"}))

	// One Kyma's plan, in the table.
	stdout, stderr, code = lmctl(t, time.Minute, append([]string{"klm", "plan", "--kyma", "k1"}, kubeconfig...)...)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^k1\s+true\s+1\s+1\s+1\s+1\s+` + takeover.KymaFinalizer + `\s+1\s+0\s+ok$`))
	g.Expect(stdout).To(MatchRegexp(`(?m)^alpha\s+k1-alpha-1\s+1\.2\.3\s+1\s+1: ConfigMap ` + rt + `/owners\s+1\s+-\s+-$`))
	g.Expect(stdout).To(ContainSubstring("labelled takes over the 1 of 1 Kymas labelled"))
	g.Expect(versionsOf()).To(Equal(before), "lmctl klm plan writes nothing")

	// A Kyma that does not exist fails the command, naming it.
	_, stderr, code = lmctl(t, time.Minute, append([]string{"klm", "plan", "--kyma", "missing"}, kubeconfig...)...)
	g.Expect(code).NotTo(BeZero())
	g.Expect(stderr).To(ContainSubstring("reading Kyma missing"))

	// Afterwards: this operator's Manifest recorded taking over KLM's.
	ours := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "k1-alpha", Namespace: ns,
		Labels: map[string]string{v1beta2.KymaNameLabel: "k1", v1beta2.ModuleNameLabel: "alpha"}},
		Spec: v1beta2.ManifestSpec{Remote: true, ModuleName: "alpha", Version: "1.2.3"}}
	g.Expect(kcp.Create(ctx, ours)).To(Succeed())
	ours.Status.TakenOver = &v1beta2.TakenOver{Manifest: "k1-alpha-1", Objects: 1, Time: metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))}
	g.Expect(kcp.Status().Update(ctx, ours)).To(Succeed())
	stdout, stderr, code = lmctl(t, time.Minute, append([]string{"klm", "status"}, kubeconfig...)...)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^k1\s+alpha\s+k1-alpha\s+k1-alpha-1\s+1\s+2026-12-04 10:00:00\s+finalizers ` + takeover.KymaFinalizer + `; 1 agent objects; Manifest k1-alpha-1$`))
	g.Expect(stdout).To(MatchRegexp(`(?m)^TOTAL\s+1\s+1 KLM Manifests$`))
	stdout, stderr, code = lmctl(t, time.Minute, append([]string{"klm", "status", "-o", "json"}, kubeconfig...)...)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(json.Unmarshal([]byte(stdout), plan)).To(Succeed(), stdout)
	g.Expect(plan.Kymas[0].Modules[0].Manifest).To(Equal("k1-alpha"))
	g.Expect(plan.Kymas[0].Modules[0].TakenOver.Manifest).To(Equal("k1-alpha-1"))
	g.Expect(plan.Totals.TakenOver).To(Equal(1))
}

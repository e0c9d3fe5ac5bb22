package klm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/klm"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/runtimes"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// One API server is the control plane (kcp-system) and, through the
// Kyma's kubeconfig Secret, the runtime (kyma-system) too.
var (
	c          client.Client
	kubeconfig []byte
)

// kcp and rt are the namespaces of one run of the test (-count).
var (
	kcp, rt string
	runs    int
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cp, err := testcluster.StartControlPlane(context.Background(), testcluster.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	if c, err = testenv.NewClient(cp.Config()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfig = cp.Kubeconfig()
	return m.Run()
}

func runtimeOf(ctx context.Context, kyma string) (client.Client, error) {
	cfg, err := runtimes.Config(ctx, c, kcp, kyma)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: c.Scheme()})
}

// marked is a ConfigMap as KLM applies it for the Manifest owner.
func marked(name, owner string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rt,
		Labels:      map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue},
		Annotations: map[string]string{takeover.DeprecatedOwnedByAnnotation: kcp + "/" + owner}}}
}

func configMapRecord(name string) v1beta2.Resource {
	return v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: rt, Name: name}
}

// TestPlanAndStatusOfATakeover plans the takeover of a Kyma in KLM's shape:
// the figures and names are those the operator's takeover would act on,
// nothing is written, and the status shows what a Manifest took over.
func TestPlanAndStatusOfATakeover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	runs++
	kcp, rt = fmt.Sprintf("kcp-%d", runs), fmt.Sprintf("runtime-%d", runs)
	for _, ns := range []string{kcp, rt} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k1", Namespace: kcp,
		Labels: map[string]string{takeover.Label: "true"}, Finalizers: []string{takeover.KymaFinalizer, takeover.PurgeFinalizer}},
		Spec: v1beta2.KymaSpec{Channel: "regular"}}
	g.Expect(c.Create(ctx, kyma)).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k1", Namespace: kcp, Labels: map[string]string{v1beta2.KymaNameLabel: "k1"}},
		Data: map[string][]byte{"config": kubeconfig}})).To(Succeed())

	// alpha: one object KLM marked, the owner's object KLM's record names,
	// one that KLM marked for another Manifest (not alpha's to take), one
	// gone, and the default CR KLM created.
	for _, obj := range []client.Object{marked("alpha-config", "k1-alpha-1"), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owners", Namespace: rt}},
		marked("others", "k1-other-3")} {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
	}
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "k1-alpha-1", Namespace: rt}, Data: map[string]string{"size": "1"}}, client.FieldOwner(takeover.DefaultCRManager))).To(Succeed())
	defaultCR := &unstructured.Unstructured{}
	defaultCR.SetAPIVersion("v1")
	defaultCR.SetKind("ConfigMap")
	klmManifest(t, "k1-alpha-1", "alpha", defaultCR, configMapRecord("alpha-config"), configMapRecord("owners"), configMapRecord("others"), configMapRecord("gone"))
	// beta: taken over already by this operator's Manifest; its policy is
	// Ignore, so a custom resource of its default's name is not taken,
	// even one KLM's default CR manager wrote.
	g.Expect(c.Create(ctx, marked("beta-config", "k1-beta-2"))).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "beta-default", Namespace: rt}}, client.FieldOwner(takeover.DefaultCRManager))).To(Succeed())
	betaCR := defaultCR.DeepCopy()
	betaCR.SetName("beta-default")
	klmManifest(t, "k1-beta-2", "beta", betaCR, configMapRecord("beta-config"))
	ignore(g, "k1-beta-2")
	ours := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "k1-beta", Namespace: kcp, Labels: map[string]string{v1beta2.KymaNameLabel: "k1", v1beta2.ModuleNameLabel: "beta"}},
		Spec: v1beta2.ManifestSpec{Remote: true, ModuleName: "beta", Version: "1.0.0"}}
	g.Expect(c.Create(ctx, ours)).To(Succeed())
	ours.Status.TakenOver = &v1beta2.TakenOver{Manifest: "k1-beta-2", Objects: 1, Time: metav1.Now()}
	g.Expect(c.Status().Update(ctx, ours)).To(Succeed())

	// The runtime side: the runtime's Kyma as KLM created it, a catalog
	// copy, KLM's agent Secret, and a Service of the agent's name that is
	// not KLM's.
	g.Expect(c.Create(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: rt}, Spec: v1beta2.KymaSpec{Channel: "regular"}},
		client.FieldOwner(takeover.UserAgentManager))).To(Succeed())
	g.Expect(c.Create(ctx, &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: "alpha-1.0.0", Namespace: rt}, Spec: v1beta2.ModuleTemplateSpec{ModuleName: "alpha", Version: "1.0.0"}},
		client.FieldOwner(takeover.CatalogManager))).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "skr-webhook-tls", Namespace: rt, Labels: map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue}}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "skr-webhook", Namespace: rt}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}})).To(Succeed())

	before := versions(g)
	plan, err := klm.BuildPlan(ctx, c, kcp, "", rt, runtimeOf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions(g)).To(Equal(before), "planning writes nothing")

	g.Expect(plan.Kymas).To(HaveLen(1))
	k := plan.Kymas[0]
	g.Expect(k.Labelled).To(BeTrue())
	g.Expect(k.CoveredBy).To(Equal([]takeover.Policy{takeover.Labelled, takeover.All}))
	g.Expect(k.KLMFinalizers).To(ConsistOf(takeover.KymaFinalizer, takeover.PurgeFinalizer))
	g.Expect(k.RuntimeError).To(BeEmpty())
	g.Expect(k.Modules).To(HaveLen(2))
	alpha, beta := k.Modules[0], k.Modules[1]
	g.Expect(alpha.KLMManifest).To(Equal("k1-alpha-1"))
	g.Expect(alpha.TakeOver).To(Equal(1))
	g.Expect(alpha.Left).To(Equal([]string{"ConfigMap " + rt + "/owners", "ConfigMap " + rt + "/others"}), "the owner's object, and one KLM applied for another Manifest, are never taken")
	g.Expect(alpha.LeftCount).To(Equal(2))
	g.Expect(alpha.Gone).To(Equal(1))
	g.Expect(alpha.DefaultCR).To(Equal("ConfigMap "+rt+"/k1-alpha-1"), "KLM names an unnamed default CR after its Manifest")
	g.Expect(alpha.Manifest).To(BeEmpty())
	g.Expect(beta.Manifest).To(Equal("k1-beta"))
	g.Expect(beta.TakenOver.Manifest).To(Equal("k1-beta-2"))
	g.Expect(beta.DefaultCR).To(BeEmpty(), "under Ignore the default CR is never the module's")
	g.Expect(k.Runtime.KymaManagers).To(ConsistOf(takeover.UserAgentManager))
	g.Expect(k.Runtime.CatalogCopies).To(Equal(1))
	g.Expect(k.Runtime.Agent).To(Equal([]string{"Secret " + rt + "/skr-webhook-tls"}), "only what KLM labelled is its agent")
	g.Expect(plan.Totals).To(Equal(klm.Totals{Kymas: 1, Labelled: 1, KLMManifests: 2, TakeOver: 2, Left: 2, Gone: 1, TakenOver: 1}))

	var out bytes.Buffer
	g.Expect(klm.WritePlan(&out, plan)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("2: ConfigMap " + rt + "/owners, ConfigMap " + rt + "/others"))
	g.Expect(out.String()).To(ContainSubstring("k1-beta"))
	g.Expect(out.String()).To(ContainSubstring("labelled takes over the 1 of 1 Kymas labelled " + takeover.Label + "=true"))
	out.Reset()
	g.Expect(klm.WriteStatus(&out, plan)).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`k1\s+beta\s+k1-beta\s+k1-beta-2\s+1\s`))
	g.Expect(out.String()).To(ContainSubstring("Manifest k1-alpha-1"), "what is left of KLM")
	g.Expect(out.String()).To(ContainSubstring("1 agent objects; 1 catalog copies; runtime Kyma managers manager"))

	// A runtime that cannot be reached is reported, and the plan goes on.
	g.Expect(c.Create(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k2", Namespace: kcp}, Spec: v1beta2.KymaSpec{Channel: "regular"}})).To(Succeed())
	plan, err = klm.BuildPlan(ctx, c, kcp, "", rt, runtimeOf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Kymas).To(HaveLen(2))
	g.Expect(plan.Kymas[1].RuntimeError).To(ContainSubstring("no kubeconfig Secret of Kyma k2"))
	g.Expect(plan.Kymas[1].CoveredBy).To(Equal([]takeover.Policy{takeover.All}), "an unlabelled Kyma is taken over only under all")
	g.Expect(plan.Totals.TakeOver).To(Equal(2))
	g.Expect(plan.Totals.Labelled).To(Equal(1))
}

func klmManifest(t *testing.T, name, module string, resource *unstructured.Unstructured, synced ...v1beta2.Resource) {
	t.Helper()
	g := NewWithT(t)
	m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcp, Finalizers: []string{takeover.ManifestFinalizer},
		Labels: map[string]string{v1beta2.KymaNameLabel: "k1", v1beta2.ModuleNameLabel: module, v1beta2.ManagedByLabel: v1beta2.ManagedByValue}},
		Spec: v1beta2.ManifestSpec{Remote: true, Version: "1.0.0", Resource: resource}}
	g.Expect(c.Create(context.Background(), m)).To(Succeed())
	m.Status.Synced = synced
	g.Expect(c.Status().Update(context.Background(), m)).To(Succeed())
}

// ignore sets a KLM Manifest's customResourcePolicy to Ignore.
func ignore(g Gomega, name string) {
	m := &v1beta2.Manifest{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: kcp, Name: name}, m)).To(Succeed())
	m.Spec.CustomResourcePolicy = v1beta2.CustomResourcePolicyIgnore
	g.Expect(c.Update(context.Background(), m)).To(Succeed())
}

// versions are the resourceVersions of everything in both namespaces.
func versions(g Gomega) map[string]string {
	out := map[string]string{}
	lists := []func() client.ObjectList{
		func() client.ObjectList { return &corev1.ConfigMapList{} }, func() client.ObjectList { return &corev1.SecretList{} },
		func() client.ObjectList { return &v1beta2.ManifestList{} }, func() client.ObjectList { return &v1beta2.KymaList{} },
		func() client.ObjectList { return &v1beta2.ModuleTemplateList{} },
	}
	for _, newList := range lists {
		for _, ns := range []string{kcp, rt} {
			list := newList()
			g.Expect(c.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
			items, err := meta.ExtractList(list)
			g.Expect(err).NotTo(HaveOccurred())
			for _, item := range items {
				o := item.(client.Object)
				out[fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName())] = o.GetResourceVersion()
			}
		}
	}
	g.Expect(len(out)).To(BeNumerically(">", 10), "the objects of the test are read")
	return out
}

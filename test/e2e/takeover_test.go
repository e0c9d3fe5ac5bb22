package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	kymactrl "github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// Taking over a runtime that the Kyma lifecycle-manager (KLM) runs (issue
// 35, docs/migrating-from-klm.md). KLM cannot be built here, so the test
// writes exactly what KLM 1.20.4 (and main at c5b83f1b5) leaves, each fact
// from its source (../shared/context/klm-takeover-facts.md names the files):
//   - its Manifests: `<kyma>-<module>-<fnv32>`, labelled with the Kyma and
//     module, with KLM's finalizers (declarative.kyma-project.io/finalizer;
//     resource.kyma-project.io/finalizer where a default CR exists), owned
//     by the Kyma, and status.synced, the inventory of what it applied;
//   - the module objects, applied with force by
//     declarative.kyma-project.io/applier, with KLM's marks
//     (managed-by=kyma, app.kubernetes.io/component and part-of, the
//     owned-by annotation and the disclaimer; render/default_transforms.go);
//   - the default CR, created with Update by resource.kyma-project.io/finalizer
//     and no label, its status written by the module's operator ("manager");
//   - the Kyma with KLM's finalizers operator.kyma-project.io/Kyma and the
//     1.20.x purge finalizer;
//   - the runtime's Kyma (created and its status written by "manager", its
//     labels applied by kyma-sync-context), KLM's copy of a catalog entry
//     (catalog-sync), and KLM's agent, skr-webhook (lifecycle-manager).
//
// The runtimes here run no Deployment controller: "no workload rolled" is
// the Deployments' generation and pod template, unchanged.

// klmTakeoverSerial keeps the names of each run of the test apart.
var klmTakeoverSerial atomic.Int64

// klmModule is one module of the test, with its content per version.
type klmModule struct {
	name     string
	versions map[string][]string // version → YAML documents
	// defaultCR is the template's spec.data (nil: none).
	defaultCR *unstructured.Unstructured
	policy    v1beta2.CustomResourcePolicy
}

func (m klmModule) publish(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	for version, docs := range m.versions {
		content := ociartifact.Module{RawManifest: []byte(strings.Join(docs, "\n---\n"))}
		artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), m.name, version), content.Layers(), ociartifact.Insecure())
		g.Expect(err).NotTo(HaveOccurred())
		template := samplemodules.Version{Module: m.name, Version: version, DefaultCR: m.defaultCR}.Template(kcpNamespace, artifact.Links)
		g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
		t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	}
}

func TestTakeOverARuntimeInKLMsShape(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	n := klmTakeoverSerial.Add(1)
	group := fmt.Sprintf("takeover%d.e2e.example", n)
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samples.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Sample, plural: samples, singular: sample, listKind: SampleList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}`, group)
	deployment := func(name, env string) string {
		envs := ""
		if env != "" {
			envs = fmt.Sprintf("\n        env: [{name: %s, value: \"yes\"}]", env)
		}
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: kyma-system, labels: {app: %[1]s}}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - name: manager
        image: europe-docker.pkg.dev/kyma-project/prod/%[1]s:1.0.0%[2]s`, name, envs)
	}
	configMap := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: kyma-system}\ndata: {mode: klm}", name)
	}
	// Module names are letters only (the API's rule).
	run := string([]byte{byte('a' + n/676%26), byte('a' + n/26%26), byte('a' + n%26)})
	withCR := "klmcr-" + run
	ignored := "klmignore-" + run
	upgraded := "klmupgrade-" + run
	sample := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	sample.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Sample"})
	sample.SetName(withCR + "-default")
	modules := []klmModule{
		{name: withCR, policy: v1beta2.CustomResourcePolicyCreateAndDelete, defaultCR: sample,
			versions: map[string][]string{"1.0.0": {crd, deployment(withCR+"-manager", ""), configMap(withCR + "-config")}}},
		{name: ignored, policy: v1beta2.CustomResourcePolicyIgnore, defaultCR: sample,
			versions: map[string][]string{"1.0.0": {configMap(ignored + "-settings")}}},
		{name: upgraded, policy: v1beta2.CustomResourcePolicyCreateAndDelete,
			versions: map[string][]string{
				"1.0.0": {deployment(upgraded+"-worker", "DROPPED_IN_2"), configMap(upgraded + "-config"), configMap(upgraded + "-extra")},
				"2.0.0": {deployment(upgraded+"-worker", ""), configMap(upgraded + "-config")},
			}},
	}
	entries := make([]v1beta2.Module, 0, len(modules))
	for _, m := range modules {
		m.publish(t)
		newReleaseMeta(t, m.name, map[string]string{"regular": "1.0.0", "fast": "2.0.0"})
		entry := module(m.name)
		entry.CustomResourcePolicy = m.policy
		entries = append(entries, entry)
	}

	// The Kyma, held (skip-reconciliation, the handover lever KLM knows
	// too) until KLM's state is in place, as an SRE does it.
	k := newKymaWithLabels(t, map[string]string{v1beta2.SkipReconciliationLabel: "true", takeover.Label: "true"}, entries...)
	kyma := k.get(g)
	patch := client.MergeFrom(kyma.DeepCopy())
	controllerutil.AddFinalizer(kyma, takeover.KymaFinalizer)
	controllerutil.AddFinalizer(kyma, takeover.PurgeFinalizer)
	g.Expect(env.kcpClient.Patch(ctx, kyma, patch)).To(Succeed())

	klm := newKLMRuntime(k, kyma)
	klm.syncNamespace(t)
	for _, m := range modules {
		klm.install(t, m, "1.0.0")
	}
	klm.runtimeSide(t, kyma, entries)
	// A record that names the runtime owner's ConfigMap, which KLM never
	// marked as its own: a Manifest's inventory alone makes nothing the
	// module's.
	owners := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: withCR + "-owners", Namespace: v1beta2.DefaultRuntimeNamespace}, Data: map[string]string{"owner": "yes"}}
	g.Expect(klm.rc.Create(ctx, owners)).To(Succeed())
	t.Cleanup(func() { _ = klm.rc.Delete(context.Background(), owners) })
	klmManifest := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: takeover.ManifestName(k.name, withCR)}, klmManifest)).To(Succeed())
	klmManifest.Status.Synced = append(klmManifest.Status.Synced, v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: owners.Namespace, Name: owners.Name})
	g.Expect(env.kcpClient.Status().Update(ctx, klmManifest)).To(Succeed())
	before := klm.snapshot(t)

	// Taken over: the hold goes.
	k.update(t, func(kyma *v1beta2.Kyma) { delete(kyma.Labels, v1beta2.SkipReconciliationLabel) })

	// Ready in a status this operator wrote, each module by a Manifest of
	// its own that records the takeover; KLM's Manifests are gone.
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), describe(kyma))
		g.Expect(kyma.Status.Conditions).To(ContainElement(HaveField("Type", "Ready")))
		for _, m := range modules {
			manifest := &v1beta2.Manifest{}
			g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: kymactrl.ManifestName(k.name, m.name)}, manifest)).To(Succeed())
			g.Expect(manifest.Status.State).To(Equal(v1beta2.StateReady))
			g.Expect(manifest.Status.TakenOver).NotTo(BeNil())
			g.Expect(manifest.Status.TakenOver.Manifest).To(Equal(takeover.ManifestName(k.name, m.name)))
			g.Expect(apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: takeover.ManifestName(k.name, m.name)}, &v1beta2.Manifest{}))).
				To(BeTrue(), "KLM's Manifest of %s is released", m.name)
		}
		g.Expect(kyma.Finalizers).To(ConsistOf(v1beta2.KymaFinalizer), "KLM's finalizers went once this operator's was on")
	}, 2*timeout, interval).Should(Succeed())

	// Nothing recreated, no workload rolled; every field KLM's managers
	// owned is this operator's, and KLM's marks are gone.
	after := klm.snapshot(t)
	for key, was := range before {
		now, ok := after[key]
		g.Expect(ok).To(BeTrue(), "%s is still there", key)
		g.Expect(now.UID).To(Equal(was.UID), "%s was not recreated", key)
		if was.Kind == "Deployment" {
			// The API server counts a change of a Deployment's annotations
			// as a new generation (it copies them to the ReplicaSet):
			// removing KLM's owned-by and disclaimer annotations moves it
			// once. The pod template, which alone makes pods roll, is the
			// same.
			g.Expect(now.template).To(Equal(was.template), "%s did not roll", key)
			g.Expect(now.Generation).To(BeNumerically("<=", was.Generation+1), "%s: one metadata change at most", key)
		} else {
			g.Expect(now.Generation).To(Equal(was.Generation), "%s: its spec is unchanged", key)
		}
	}
	klmManagers := []string{takeover.ApplierManager, takeover.DefaultCRManager, takeover.SyncContextManager, takeover.CatalogManager, takeover.StatusManager}
	g.Eventually(func(g Gomega) {
		for key, o := range klm.snapshot(t) {
			if !o.module {
				continue
			}
			g.Expect(klmEntries(o.managers, klmManagers...)).To(BeEmpty(), "%s: no entry of KLM's left", key)
			g.Expect(o.managers).To(ContainElement("lifecycle-manager/Apply"), "%s: this operator's manager owns it", key)
			g.Expect(o.labels).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue), key)
			g.Expect(o.labels).NotTo(HaveKey("app.kubernetes.io/component"), "%s: KLM's mark, owned by this operator now, is pruned", key)
			g.Expect(o.annotations).NotTo(HaveKey(takeover.DeprecatedOwnedByAnnotation), key)
		}
	}, timeout, interval).Should(Succeed())

	cr := klm.get(g, sample.GroupVersionKind(), v1beta2.DefaultRuntimeNamespace, sample.GetName())
	g.Expect(cr.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, withCR), "the default CR KLM created is the module's")
	g.Expect(managersOf(cr.GetManagedFields())).NotTo(ContainElement(HavePrefix(takeover.DefaultCRManager)))
	g.Expect(managersOf(cr.GetManagedFields())).To(ContainElement("manager/Update"), "the module's operator keeps its own entry")
	rk := klm.get(g, v1beta2.GroupVersion.WithKind("Kyma"), v1beta2.DefaultRuntimeNamespace, v1beta2.DefaultRuntimeKymaName)
	g.Expect(klmEntries(managersOf(rk.GetManagedFields()), takeover.SyncContextManager, takeover.UserAgentManager, takeover.StatusManager)).To(BeEmpty())
	g.Expect(rk.GetLabels()).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue))

	// The sync namespace stays as KLM left it: its labels say how pods
	// there run (istio-injection).
	syncNS := &corev1.Namespace{}
	g.Expect(klm.rc.Get(ctx, client.ObjectKey{Name: v1beta2.DefaultRuntimeNamespace}, syncNS)).To(Succeed())
	g.Expect(syncNS.Labels).To(HaveKeyWithValue("istio-injection", "enabled"))

	// KLM's agent is gone; its catalog copy is this operator's.
	for _, o := range klm.agent {
		g.Expect(apierrors.IsNotFound(klm.rc.Get(ctx, client.ObjectKeyFromObject(o), o))).To(BeTrue(), "KLM's agent: %T %s", o, o.GetName())
	}

	// Drift is corrected by this operator.
	worker := &appsv1.Deployment{}
	g.Expect(klm.rc.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: upgraded + "-worker"}, worker)).To(Succeed())
	scaled := worker.DeepCopy()
	scaled.Spec.Replicas = ptrTo(int32(3))
	g.Expect(klm.rc.Update(ctx, scaled, client.FieldOwner("kubectl-scale"))).To(Succeed())
	g.Expect(klm.rc.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: v1beta2.DefaultRuntimeNamespace, Name: withCR + "-config"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(klm.rc.Get(ctx, client.ObjectKeyFromObject(worker), worker)).To(Succeed())
		g.Expect(*worker.Spec.Replicas).To(Equal(int32(1)))
		g.Expect(klm.rc.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: withCR + "-config"}, &corev1.ConfigMap{})).To(Succeed())
	}, timeout, interval).Should(Succeed(), "drift in objects KLM installed is corrected")

	// An upgrade that drops a field (an env var) and a whole resource
	// prunes both.
	k.update(t, func(kyma *v1beta2.Kyma) {
		for i := range kyma.Spec.Modules {
			if kyma.Spec.Modules[i].Name == upgraded {
				kyma.Spec.Modules[i].Channel = "fast"
			}
		}
	})
	g.Eventually(func(g Gomega) {
		manifest := k.manifest(g, upgraded)
		g.Expect(manifest.Spec.Version).To(Equal("2.0.0"))
		g.Expect(manifest.Status.State).To(Equal(v1beta2.StateReady))
		g.Expect(manifest.Status.Synced).NotTo(ContainElement(HaveField("Name", upgraded+"-extra")))
		g.Expect(klm.rc.Get(ctx, client.ObjectKeyFromObject(worker), worker)).To(Succeed())
		g.Expect(worker.Spec.Template.Spec.Containers[0].Env).To(BeEmpty(), "the env var the new version drops is removed")
		g.Expect(apierrors.IsNotFound(klm.rc.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: upgraded + "-extra"}, &corev1.ConfigMap{}))).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	// Deleting the Kyma finishes and leaves the runtime clean: the
	// modules' objects (the default CR and KLM's catalog copy too) and
	// the runtime's Kyma. kyma-system stays, as under KLM.
	g.Expect(env.kcpClient.Delete(ctx, k.get(g))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, &v1beta2.Kyma{}))
	}, 2*timeout, interval).Should(BeTrue(), "the Kyma is deleted")
	g.Eventually(func() map[string]takenObject { return klm.snapshot(t) }, timeout, interval).
		Should(BeEmpty(), "nothing of the modules and no runtime Kyma is left (a CRD may take a moment to go)")
	left := &corev1.ConfigMap{}
	g.Expect(klm.rc.Get(ctx, client.ObjectKeyFromObject(owners), left)).To(Succeed(), "the owner's ConfigMap stays")
	g.Expect(left.UID).To(Equal(owners.UID))
	g.Expect(left.Labels).To(BeEmpty(), "it was never taken over")
	g.Expect(klmEntries(managersOf(left.ManagedFields), "lifecycle-manager")).To(BeEmpty())
	g.Expect(apierrors.IsNotFound(klm.rc.Get(ctx, client.ObjectKeyFromObject(klm.catalogCopy), klm.catalogCopy))).To(BeTrue(), "KLM's catalog copy is removed")
}

// klmRuntime writes what KLM leaves in a runtime and in the control plane.
type klmRuntime struct {
	k  *testKyma
	rc client.Client
	// objects are what KLM's Manifests list in status.synced, plus the
	// default CR and the runtime's Kyma.
	objects     []v1beta2.Resource
	agent       []client.Object
	catalogCopy *v1beta2.ModuleTemplate
	owner       metav1.OwnerReference
}

func newKLMRuntime(k *testKyma, kyma *v1beta2.Kyma) *klmRuntime {
	return &klmRuntime{k: k, rc: k.runtime.client, owner: metav1.OwnerReference{
		APIVersion: v1beta2.GroupVersion.String(), Kind: "Kyma", Name: kyma.Name, UID: kyma.UID, Controller: ptrTo(true),
	}}
}

// syncNamespace applies kyma-system as KLM does (kyma-sync-context).
func (r *klmRuntime) syncNamespace(t *testing.T) {
	t.Helper()
	ns := &unstructured.Unstructured{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	ns.SetName(v1beta2.DefaultRuntimeNamespace)
	ns.SetLabels(map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue, "istio-injection": "enabled", "namespaces.warden.kyma-project.io/validate": "enabled"})
	NewWithT(t).Expect(r.rc.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(ns), client.FieldOwner(takeover.SyncContextManager), client.ForceOwnership)).To(Succeed())
	// The runtime goes back to the pool as it came: KLM's labels are
	// released (an apply of nothing as their only manager removes them).
	// The takeover leaves the sync namespace as KLM left it, its
	// istio-injection label above all.
	t.Cleanup(func() {
		bare := &unstructured.Unstructured{}
		bare.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		bare.SetName(v1beta2.DefaultRuntimeNamespace)
		_ = r.rc.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(bare), client.FieldOwner(takeover.SyncContextManager), client.ForceOwnership)
	})
}

// install applies version of m as KLM does and writes KLM's Manifest.
func (r *klmRuntime) install(t *testing.T, m klmModule, version string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := takeover.ManifestName(r.k.name, m.name)
	var synced []v1beta2.Resource
	for _, doc := range m.versions[version] {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1beta2.ManagedByLabel] = takeover.ManagedByValue
		labels["app.kubernetes.io/component"] = name
		labels["app.kubernetes.io/part-of"] = "Kyma"
		u.SetLabels(labels)
		u.SetAnnotations(map[string]string{
			takeover.DeprecatedOwnedByAnnotation:                        kcpNamespace + "/" + name,
			"operator.kyma-project.io/managed-by-reconciler-disclaimer": "DO NOT EDIT - This resource is managed by Kyma.",
		})
		g.Eventually(func() error {
			return r.rc.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(takeover.ApplierManager), client.ForceOwnership)
		}, timeout, interval).Should(Succeed(), "applying %s as KLM", u.GetName())
		gvk := u.GroupVersionKind()
		synced = append(synced, v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}, Namespace: u.GetNamespace(), Name: u.GetName()})
	}
	r.objects = append(r.objects, synced...)

	finalizers := []string{takeover.ManifestFinalizer}
	manifest := &v1beta2.Manifest{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: kcpNamespace,
			Labels: map[string]string{
				v1beta2.KymaNameLabel: r.k.name, v1beta2.ModuleNameLabel: m.name, v1beta2.ManagedByLabel: v1beta2.ManagedByValue,
				"operator.kyma-project.io/channel": "regular", "operator.kyma-project.io/controller-name": "manifest",
			},
			Annotations:     map[string]string{"operator.kyma-project.io/ocm-component-name": "kyma-project.io/module/" + m.name},
			OwnerReferences: []metav1.OwnerReference{r.owner},
		},
		Spec: v1beta2.ManifestSpec{
			Remote: true, Version: version, CustomResourcePolicy: m.policy,
			Install: &v1beta2.InstallInfo{Name: "raw-manifest", Source: k8sruntime.RawExtension{Raw: []byte(`{"name":"kyma-project.io/module/` + m.name + `","repo":"europe-docker.pkg.dev/kyma-project/prod/unsigned/component-descriptors","ref":"sha256:0","type":"oci-ref"}`)}},
		},
	}
	if m.defaultCR != nil {
		manifest.Spec.Resource = m.defaultCR.DeepCopy()
		if m.policy != v1beta2.CustomResourcePolicyIgnore {
			finalizers = append(finalizers, takeover.DefaultCRFinalizer)
			r.createDefaultCR(t, m.defaultCR)
		}
	}
	manifest.Finalizers = finalizers
	g.Expect(env.kcpClient.Create(ctx, manifest)).To(Succeed())
	manifest.Status = v1beta2.ManifestStatus{State: v1beta2.StateReady, Synced: synced}
	manifest.Status.LastOperation = v1beta2.LastOperation{Operation: "Installation and resources are ready", LastUpdateTime: metav1.Now()}
	g.Expect(env.kcpClient.Status().Update(ctx, manifest)).To(Succeed())
	t.Cleanup(func() { // nothing of KLM's outlives the test, whatever it got to
		left := &v1beta2.Manifest{}
		if env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(manifest), left) == nil {
			left.Finalizers = nil
			_ = env.kcpClient.Update(context.Background(), left)
			_ = env.kcpClient.Delete(context.Background(), left)
		}
	})
}

// createDefaultCR creates the default CR as KLM does (Create, its own
// manager, no label) and reports it Ready as the module's operator would.
func (r *klmRuntime) createDefaultCR(t *testing.T, data *unstructured.Unstructured) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cr := data.DeepCopy()
	cr.SetNamespace(v1beta2.DefaultRuntimeNamespace)
	g.Eventually(func() error {
		return r.rc.Create(ctx, cr.DeepCopy(), client.FieldOwner(takeover.DefaultCRManager))
	}, timeout, interval).Should(Succeed(), "the CRD is served")
	live := r.get(g, cr.GroupVersionKind(), cr.GetNamespace(), cr.GetName())
	g.Expect(unstructured.SetNestedField(live.Object, string(v1beta2.StateReady), "status", "state")).To(Succeed())
	g.Expect(r.rc.Status().Update(ctx, live, client.FieldOwner("manager"))).To(Succeed())
	gvk := cr.GroupVersionKind()
	r.objects = append(r.objects, v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}, Namespace: cr.GetNamespace(), Name: cr.GetName()})
}

// runtimeSide writes the runtime's Kyma, KLM's catalog copy and KLM's
// agent.
func (r *klmRuntime) runtimeSide(t *testing.T, kyma *v1beta2.Kyma, modules []v1beta2.Module) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	for _, name := range kymactrl.RuntimeCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		u, err := kymactrl.RuntimeCRD(ctx, r.rc, crd)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.rc.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lifecycle-manager"), client.ForceOwnership)).To(Succeed())
	}
	g.Eventually(func() error {
		return r.rc.Get(ctx, client.ObjectKey{Name: "kymas.operator.kyma-project.io"}, &apiextensionsv1.CustomResourceDefinition{})
	}, timeout, interval).Should(Succeed())

	runtimeKyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: v1beta2.DefaultRuntimeKymaName, Namespace: v1beta2.DefaultRuntimeNamespace},
		Spec:       v1beta2.KymaSpec{Channel: "regular", Modules: modules},
	}
	g.Eventually(func() error { return r.rc.Create(ctx, runtimeKyma, client.FieldOwner(takeover.UserAgentManager)) }, timeout, interval).Should(Succeed())
	labels := &unstructured.Unstructured{}
	labels.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("Kyma"))
	labels.SetNamespace(runtimeKyma.Namespace)
	labels.SetName(runtimeKyma.Name)
	labels.SetLabels(map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue, v1beta2.WatchedByLabel: "kyma", v1beta2.RuntimeIDLabel: kyma.Labels[v1beta2.RuntimeIDLabel]})
	labels.SetAnnotations(map[string]string{takeover.DeprecatedOwnedByAnnotation: kcpNamespace + "/" + kyma.Name})
	g.Expect(r.rc.Apply(ctx, client.ApplyConfigurationFromUnstructured(labels), client.FieldOwner(takeover.SyncContextManager), client.ForceOwnership)).To(Succeed())
	g.Expect(r.rc.Get(ctx, client.ObjectKeyFromObject(runtimeKyma), runtimeKyma)).To(Succeed())
	runtimeKyma.Status.State = v1beta2.StateReady
	g.Expect(r.rc.Status().Update(ctx, runtimeKyma, client.FieldOwner(takeover.UserAgentManager))).To(Succeed())
	r.objects = append(r.objects, v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Group: v1beta2.GroupVersion.Group, Version: v1beta2.GroupVersion.Version, Kind: "Kyma"},
		Namespace: runtimeKyma.Namespace, Name: runtimeKyma.Name})

	// A catalog entry KLM synced that the control plane no longer has.
	r.catalogCopy = &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: "klm-synced-" + r.k.name, Namespace: v1beta2.DefaultRuntimeNamespace}}
	copied := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"moduleName": "retired", "version": "0.1.0"}}}
	copied.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("ModuleTemplate"))
	copied.SetNamespace(r.catalogCopy.Namespace)
	copied.SetName(r.catalogCopy.Name)
	copied.SetLabels(map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue})
	g.Expect(r.rc.Apply(ctx, client.ApplyConfigurationFromUnstructured(copied), client.FieldOwner(takeover.CatalogManager), client.ForceOwnership)).To(Succeed())

	// KLM's agent, labelled as KLM labels it.
	klmLabels := map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: v1beta2.DefaultRuntimeNamespace, Labels: klmLabels}
	}
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	r.agent = []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "skr-webhook", Labels: klmLabels},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:         kcpNamespace + ".klm-watcher.operator.kyma-project.io",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: v1beta2.DefaultRuntimeNamespace, Name: "skr-webhook", Path: ptrTo("/validate/klm-watcher")}},
				Rules:        []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"nothing.e2e.example"}, APIVersions: []string{"*"}, Resources: []string{"nothing"}}}},
				SideEffects:  &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptrTo(int32(15)),
			}}},
		&appsv1.Deployment{ObjectMeta: meta("skr-webhook"), Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "skr-webhook"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "skr-webhook"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "europe-docker.pkg.dev/kyma-project/prod/runtime-watcher:1.3.0"}}}},
		}},
		&corev1.Service{ObjectMeta: meta("skr-webhook"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "skr-webhook"}, Ports: []corev1.ServicePort{{Port: 443}}}},
		&corev1.Service{ObjectMeta: meta("skr-webhook-metrics"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "skr-webhook"}, Ports: []corev1.ServicePort{{Port: 2112}}}},
		&corev1.Secret{ObjectMeta: meta("skr-webhook-tls"), Data: map[string][]byte{"ca.crt": []byte("ca"), "tls.crt": []byte("crt"), "tls.key": []byte("key")}},
	}
	for _, o := range r.agent {
		g.Expect(r.rc.Create(ctx, o, client.FieldOwner("lifecycle-manager"))).To(Succeed())
	}
}

// takenObject is what the test compares of one object before and after.
type takenObject struct {
	Kind        string
	UID         types.UID
	Generation  int64
	template    string
	managers    []string
	labels      map[string]string
	annotations map[string]string
	// module: one of the modules' objects (not the runtime's Kyma).
	module bool
}

// snapshot reads every object KLM's Manifests list, the default CR and
// the runtime's Kyma.
func (r *klmRuntime) snapshot(t *testing.T) map[string]takenObject {
	t.Helper()
	g := NewWithT(t)
	out := map[string]takenObject{}
	for _, res := range r.objects {
		gvk := schema.GroupVersionKind(res.GroupVersionKind)
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err := r.rc.Get(context.Background(), client.ObjectKey{Namespace: res.Namespace, Name: res.Name}, u)
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		template, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
		out[res.Kind+" "+res.Namespace+"/"+res.Name] = takenObject{
			Kind: res.Kind, UID: u.GetUID(), Generation: u.GetGeneration(), template: fmt.Sprint(template),
			managers: managersOf(u.GetManagedFields()), labels: u.GetLabels(), annotations: u.GetAnnotations(),
			module: res.Kind != "Kyma",
		}
	}
	return out
}

func (r *klmRuntime) get(g Gomega, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	g.Expect(r.rc.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u)).To(Succeed())
	return u
}

func managersOf(entries []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// klmEntries are the entries of KLM's managers among managers (as
// managersOf writes them).
func klmEntries(managers []string, klm ...string) []string {
	var out []string
	for _, m := range managers {
		name, _, _ := strings.Cut(m, "/Apply")
		name, _, _ = strings.Cut(name, "/Update")
		if slices.Contains(klm, name) {
			out = append(out, m)
		}
	}
	return out
}

// TestKLMInstalledModuleIsLeftWithoutTakeover has KLM's module on a Kyma
// that --klm-takeover does not cover (not labelled): this operator's
// Manifest says so, with the fix, and writes nothing: KLM's objects and
// its Manifest stay exactly as they are.
func TestKLMInstalledModuleIsLeftWithoutTakeover(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	n := klmTakeoverSerial.Add(1)
	name := "klmleft-" + string([]byte{byte('a' + n/676%26), byte('a' + n/26%26), byte('a' + n%26)})
	m := klmModule{name: name, policy: v1beta2.CustomResourcePolicyCreateAndDelete, versions: map[string][]string{
		"1.0.0": {fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-config, namespace: kyma-system}\ndata: {mode: klm}", name)},
	}}
	m.publish(t)
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKymaWithLabels(t, map[string]string{v1beta2.SkipReconciliationLabel: "true"}, module(name))
	klm := newKLMRuntime(k, k.get(g))
	klm.syncNamespace(t)
	klm.install(t, m, "1.0.0")
	before := &corev1.ConfigMap{}
	g.Expect(klm.rc.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: name + "-config"}, before)).To(Succeed())
	k.update(t, func(kyma *v1beta2.Kyma) { delete(kyma.Labels, v1beta2.SkipReconciliationLabel) })

	klmName := takeover.ManifestName(k.name, name)
	g.Eventually(func(g Gomega) {
		c := k.readyCondition(g, name)
		g.Expect(c.Reason).To(Equal("KLMInstalled"))
		g.Expect(c.Message).To(ContainSubstring("The Kyma lifecycle-manager installed this module (its Manifest " + klmName + ")"))
		g.Expect(c.Message).To(ContainSubstring("--klm-takeover=all"))
		g.Expect(c.Message).To(ContainSubstring(takeover.Label + "=true"))
	}, timeout, interval).Should(Succeed())
	after := &corev1.ConfigMap{}
	g.Expect(klm.rc.Get(ctx, client.ObjectKeyFromObject(before), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "nothing written to KLM's object")
	left := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: klmName}, left)).To(Succeed())
	g.Expect(left.Finalizers).To(Equal([]string{takeover.ManifestFinalizer}), "KLM's Manifest is left as it is")
	g.Expect(left.DeletionTimestamp).To(BeNil())
}

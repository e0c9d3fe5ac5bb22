package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// templateOperator is a module shaped like the public template-operator:
// its own Namespace, a CRD with a status schema that requires a field, an
// instance of that CRD in its manifest, a webhook configuration without
// caBundle (cert-manager would inject it), a PriorityClass, a ClusterRole,
// a manager Deployment, and a default CR of its CRD.
type templateOperator struct {
	name, namespace, group string
}

func newTemplateOperator(name string) templateOperator {
	return templateOperator{name: name, namespace: name + "-system", group: name + ".e2e.example"}
}

func (m templateOperator) crdName() string { return "templatesamples." + m.group }

func (m templateOperator) kind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: m.group, Version: "v1alpha1", Kind: "TemplateSample"}
}

func (m templateOperator) finalizer() string { return m.group + "/cleanup" }

func (m templateOperator) crdYAML() string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s
spec:
  group: %[2]s
  names: {kind: TemplateSample, listKind: TemplateSampleList, plural: templatesamples, singular: templatesample}
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
            status:
              type: object
              required: [state]
              properties:
                state: {type: string, enum: [Processing, Deleting, Ready, Error, Warning]}
`, m.crdName(), m.group)
}

func (m templateOperator) manifestYAML() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: %[3]s-priority
value: 2000000
globalDefault: false
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[3]s-manager-role
rules:
  - apiGroups: [%[2]s]
    resources: [templatesamples, templatesamples/status, templatesamples/finalizers]
    verbs: [get, list, watch, update, patch]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[3]s-validating
webhooks:
  - name: vtemplatesample.%[2]s
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
    timeoutSeconds: 2
    clientConfig:
      service: {name: %[3]s-webhook, namespace: %[1]s, path: /validate}
    rules:
      - apiGroups: [%[2]s]
        apiVersions: [v1alpha1]
        operations: [CREATE, UPDATE]
        resources: [templatesamples]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: manager
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[3]s-manager}
  template:
    metadata:
      labels: {app: %[3]s-manager}
    spec:
      priorityClassName: %[3]s-priority
      containers:
        - name: manager
          image: example.invalid/template-operator:1.0.0
---
apiVersion: %[2]s/v1alpha1
kind: TemplateSample
metadata:
  name: shipped
  namespace: %[1]s
spec:
  resourceFilePath: ./module-data/yamls
`, m.namespace, m.group, m.name)
}

// publish pushes the module's content and creates its template (with the
// default CR and the manager) and its channel.
func (m templateOperator) publish(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	content := ociartifact.Module{CRDs: []byte(m.crdYAML()), RawManifest: []byte(m.manifestYAML())}
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:1.0.0", env.registry.Host(), m.name), content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	defaultCR := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"resourceFilePath": "./module-data/yamls"}}}
	defaultCR.SetGroupVersionKind(m.kind())
	defaultCR.SetName("default")
	template := samplemodules.Version{Module: m.name, Version: "1.0.0", DefaultCR: defaultCR}.Template(kcpNamespace, artifact.Links)
	template.Spec.Manager = &v1beta2.Manager{
		GroupVersionKind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Namespace:        m.namespace, Name: "manager",
	}
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	newReleaseMeta(t, m.name, map[string]string{"regular": "1.0.0"})
}

// reconcileSamples stands in for the module's operator in the runtime, as
// the sample operator does for the sample module: while its manager
// Deployment exists, it puts a finalizer on every TemplateSample, reports it
// Ready, and, when one is deleted, cleans up and removes the finalizer. Once
// the Deployment is gone, nobody does: a removal that deleted the manager
// before the custom resources would hang.
func (m templateOperator) reconcileSamples(ctx context.Context, c client.Client) {
	manager := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: "manager"}, manager); err != nil || manager.DeletionTimestamp != nil {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(m.kind().GroupVersion().WithKind("TemplateSampleList"))
	if err := c.List(ctx, list); err != nil {
		return
	}
	for i := range list.Items {
		sample := &list.Items[i]
		switch {
		case sample.GetDeletionTimestamp() != nil:
			if controllerutil.RemoveFinalizer(sample, m.finalizer()) {
				_ = c.Update(ctx, sample)
			}
		case controllerutil.AddFinalizer(sample, m.finalizer()):
			_ = c.Update(ctx, sample)
		default:
			if state, _, _ := unstructured.NestedString(sample.Object, "status", "state"); state != "Ready" {
				_ = unstructured.SetNestedField(sample.Object, "Ready", "status", "state")
				_ = c.Status().Update(ctx, sample)
			}
		}
	}
}

// leftovers lists what of the module is still in the runtime.
func (m templateOperator) leftovers(ctx context.Context, rc client.Client) []string {
	sample := func(namespace, name string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(m.kind())
		u.SetNamespace(namespace)
		u.SetName(name)
		return u
	}
	objects := map[string]client.Object{
		"Namespace":                      &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.namespace}},
		"CRD":                            &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: m.crdName()}},
		"PriorityClass":                  &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: m.name + "-priority"}},
		"ClusterRole":                    &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: m.name + "-manager-role"}},
		"ValidatingWebhookConfiguration": &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: m.name + "-validating"}},
		"Deployment":                     &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: "manager"}},
		"default CR":                     sample(v1beta2.DefaultRuntimeNamespace, "default"),
		"shipped CR":                     sample(m.namespace, "shipped"),
	}
	var left []string
	for what, obj := range objects {
		err := rc.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			left = append(left, fmt.Sprintf("%s (%v)", what, err))
		}
	}
	return left
}

// installTemplateOperator publishes the module, installs it on a new Kyma
// and waits until it is Ready, with every part of it in the runtime.
func installTemplateOperator(t *testing.T, name string) (*testKyma, templateOperator) {
	t.Helper()
	g := NewWithT(t)
	m := newTemplateOperator(name)
	m.publish(t)
	k := newKymaFor(t, m, module(name))
	k.eventuallyModuleReady(t, name)
	g.Expect(m.leftovers(context.Background(), k.runtime.client)).To(HaveLen(8), "every part of the module is installed")
	g.Eventually(func(g Gomega) {
		g.Expect(manifestKstatus(g, k, name).Status).To(Equal(status.CurrentStatus))
	}, timeout, interval).Should(Succeed())
	return k, m
}

// newKymaFor is newKyma with the module's operator running in the Kyma's
// runtime for the whole test, cleanup included.
func newKymaFor(t *testing.T, m templateOperator, modules ...v1beta2.Module) *testKyma {
	t.Helper()
	var k *testKyma
	started := make(chan *runtimeHandle, 1)
	// The operator's cleanup must run after the Kyma's (cleanups run last
	// in, first out), so it is registered first and follows the runtime
	// the Kyma gets.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var rt *runtimeHandle
		select {
		case rt = <-started:
		case <-ctx.Done():
			return
		}
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			m.reconcileSamples(ctx, rt.client)
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	k = newKyma(t, modules...)
	started <- k.runtime
	return k
}

// manifestKstatus is what kstatus (Flux's and Argo's health checks) makes
// of the module's live Manifest.
func manifestKstatus(g Gomega, k *testKyma, moduleName string) *status.Result {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("Manifest"))
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, moduleName)}, u)).To(Succeed())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	return res
}

func (k *testKyma) manifest(g Gomega, moduleName string) *v1beta2.Manifest {
	m := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, moduleName)}, m)).To(Succeed())
	return m
}

func condition(m *v1beta2.Manifest, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(m.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// expectRemoved waits until the module's Manifest is gone and nothing of
// the module is left in the runtime, logs when the Manifest went, and
// returns how long all of it took from start. How long is a figure to log,
// not to assert (KLM takes 15–26 s for the same module; here it takes 6–12
// s on two busy cores): a bound on it failed tests on a loaded machine, and
// the last wait of a Kyma deletion got only what the removal left of it.
func expectRemoved(t *testing.T, k *testKyma, m templateOperator, start time.Time) time.Duration {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var manifestGone time.Duration
	g.Eventually(func(g Gomega) {
		err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, m.name)}, &v1beta2.Manifest{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Manifest is still there")
		if manifestGone == 0 {
			manifestGone = time.Since(start)
		}
		g.Expect(m.leftovers(ctx, k.runtime.client)).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
	t.Logf("Manifest gone after %s", manifestGone.Round(100*time.Millisecond))
	return time.Since(start)
}

// observeReady records every Ready condition the module's Manifest is
// written with, through a watch (a poll would miss a status that lasts a
// few hundred milliseconds), until the returned function is called.
func observeReady(t *testing.T, k *testKyma, moduleName string) func() []metav1.Condition {
	t.Helper()
	g := NewWithT(t)
	wc, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(context.Background(), &v1beta2.ManifestList{}, client.InNamespace(kcpNamespace),
		client.MatchingFields{"metadata.name": kyma.ManifestName(k.name, moduleName)})
	g.Expect(err).NotTo(HaveOccurred())
	var seen []metav1.Condition
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if m, ok := ev.Object.(*v1beta2.Manifest); ok {
				seen = append(seen, condition(m, v1beta2.ConditionReady))
			}
		}
	}()
	return func() []metav1.Condition {
		w.Stop()
		<-done
		return seen
	}
}

// expectOwnResourcesNeverBlocked checks the Ready conditions a removal went
// through: the module's own custom resources (the shipped instance, the
// default CR) are never reported as someone else's that block it.
func expectOwnResourcesNeverBlocked(g Gomega, seen []metav1.Condition) {
	g.Expect(seen).NotTo(BeEmpty())
	g.Expect(seen).NotTo(ContainElement(HaveField("Reason", "WaitingForCustomResources")),
		"the module's own custom resources were reported as blocking its removal")
}

// TestModuleRemovalOfATemplateOperatorLikeModule installs a module shaped
// like the public template-operator (which ships an instance of its own
// CRD) to Ready, drops it from the Kyma's spec, and checks that it is gone,
// every part of it (logging how long it took), and that its own custom resources were
// never reported as blocking it. (The code before the first fix counted the
// shipped instance as a user's and waited for it forever; the code after it
// still reported it, while its operator finalized it, as a resource "to be
// deleted by its owner".)
func TestModuleRemovalOfATemplateOperatorLikeModule(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k, m := installTemplateOperator(t, "tpl-removal")

	observed := observeReady(t, k, m.name)
	start := time.Now()
	k.withModules(t)
	took := expectRemoved(t, k, m, start)
	expectOwnResourcesNeverBlocked(g, observed())
	t.Logf("Template-operator-like module removed (Kyma spec dropped it) in %s", took.Round(100*time.Millisecond))
	k.eventuallyReady(t)
}

// TestKymaDeletionOfATemplateOperatorLikeModule deletes the Kyma of a
// template-operator-like module: the Kyma and every part of the module are
// gone (logging how long it took).
func TestKymaDeletionOfATemplateOperatorLikeModule(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installTemplateOperator(t, "tpl-kyma-deletion")

	observed := observeReady(t, k, m.name)
	start := time.Now()
	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	took := expectRemoved(t, k, m, start)
	expectOwnResourcesNeverBlocked(g, observed())
	g.Eventually(func(g Gomega) {
		err := env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, &v1beta2.Kyma{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	t.Logf("Template-operator-like module removed with its Kyma in %s (Kyma gone after %s)", took.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// TestKymaDeletionBlockedByAUsersCustomResource has a user create a custom
// resource of a template-operator-like module's CRD, and deletes the Kyma:
// the module's own custom resources go, the user's blocks the removal, the
// Manifest (Deleting, kstatus Terminating) and the Kyma's module entry
// name it, nothing else of the module is removed meanwhile (its operator
// must stay for the user's resource), and deleting it lets the removal
// finish.
func TestKymaDeletionBlockedByAUsersCustomResource(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installTemplateOperator(t, "tpl-blocked")
	rc := k.runtime.client

	users := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"owner": "a user"}}}
	users.SetGroupVersionKind(m.kind())
	users.SetNamespace(v1beta2.DefaultRuntimeNamespace)
	users.SetName("users-sample")
	g.Expect(rc.Create(ctx, users)).To(Succeed())

	observed := observeReady(t, k, m.name)
	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	const named = "TemplateSample kyma-system/users-sample"
	g.Eventually(func(g Gomega) {
		manifest := k.manifest(g, m.name)
		g.Expect(manifest.Status.State).To(Equal(v1beta2.StateDeleting))
		ready := condition(manifest, v1beta2.ConditionReady)
		g.Expect(ready.Reason).To(Equal("WaitingForCustomResources"))
		g.Expect(ready.Message).To(ContainSubstring("Waiting for 1 custom resources that are not the module's"))
		g.Expect(ready.Message).To(ContainSubstring(named))
		g.Expect(condition(manifest, v1beta2.ConditionReconciling)).To(HaveField("Reason", v1beta2.ReasonDeleting))
		g.Expect(manifestKstatus(g, k, m.name).Status).To(Equal(status.TerminatingStatus))

		entry := k.moduleStatus(g, m.name)
		g.Expect(entry.State).To(Equal(v1beta2.StateDeleting))
		g.Expect(entry.Message).To(ContainSubstring(named))

		for _, own := range []client.Object{sampleRef(m, v1beta2.DefaultRuntimeNamespace, "default"), sampleRef(m, m.namespace, "shipped")} {
			g.Expect(apierrors.IsNotFound(rc.Get(ctx, client.ObjectKeyFromObject(own), own))).To(BeTrue(), "the module's own custom resources go first")
		}
	}, timeout, interval).Should(Succeed())
	for _, kept := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: "manager"}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: m.crdName()}},
	} {
		g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed(), "nothing else is removed while a user's resource blocks")
		g.Expect(kept.GetDeletionTimestamp()).To(BeNil())
	}

	start := time.Now()
	g.Expect(rc.Delete(ctx, users)).To(Succeed())
	took := expectRemoved(t, k, m, start)
	t.Logf("Removal finished %s after the user's resource was deleted", took.Round(100*time.Millisecond))
	for _, c := range observed() {
		if c.Reason == "WaitingForCustomResources" {
			g.Expect(c.Message).NotTo(Or(ContainSubstring("/shipped"), ContainSubstring("/default")), "only the user's resource blocks")
		}
	}
}

func sampleRef(m templateOperator, namespace, name string) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(m.kind())
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestManifestKstatusInEachState reads live Manifests with kstatus (as Flux
// and Argo health checks do) in the states a module can be in short of
// deletion: Processing and a module reporting Error are InProgress, a
// broken content link is InProgress with Reconciling=ProgressingWithRetry
// (it is retried: a push fixes it) and the cause in an event, not in the
// condition, and an ownership conflict is Failed with Stalled=True (only a
// person can fix it).
func TestManifestKstatusInEachState(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const broken, conflicting = "kstatus-broken-link", "kstatus-conflict"
	link := fmt.Sprintf("oci://%s/modules/%s@sha256:%064x", env.registry.Host(), broken, 1)
	template := samplemodules.Version{Module: broken, Version: "1.0.0"}.Template(kcpNamespace, map[string]string{v1beta2.RawManifestResourceName: link})
	g.Expect(env.kcpClient.Create(ctx, template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	newReleaseMeta(t, broken, map[string]string{"regular": "1.0.0"})
	rawModule(t, conflicting, configMapYAML("", "owners-kstatus", "from", "module"))

	// The owner's ConfigMap stays until the Kyma is gone: deleted while the
	// Kyma's deletion starts, the conflicting module would create it (it is
	// no one else's any more) in a race with its own removal.
	owners := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owners-kstatus", Namespace: v1beta2.DefaultRuntimeNamespace}}
	var ownersRuntime client.Client
	t.Cleanup(func() {
		if ownersRuntime != nil {
			_ = ownersRuntime.Delete(context.Background(), owners)
		}
	})
	k := newKyma(t, module(samplemodules.Sample), module(broken))
	ownersRuntime = k.runtime.client
	g.Eventually(func() error { return ownersRuntime.Create(ctx, owners.DeepCopy()) }, timeout, interval).Should(Succeed())
	k.withModules(t, module(samplemodules.Sample), module(broken), module(conflicting))
	k.eventuallyModuleReady(t, samplemodules.Sample)

	expect := func(moduleName string, state v1beta2.State, reason, reconciling string, stalled bool, kstatus status.Status) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			m := k.manifest(g, moduleName)
			ready := condition(m, v1beta2.ConditionReady)
			g.Expect(m.Status.State).To(Equal(state), "%s: %+v", moduleName, ready)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "kubectl wait --for=condition=Ready does not pass")
			g.Expect(ready.Reason).To(Equal(reason))
			g.Expect(condition(m, v1beta2.ConditionReconciling).Reason).To(Equal(reconciling))
			g.Expect(condition(m, v1beta2.ConditionStalled).Status == metav1.ConditionTrue).To(Equal(stalled))
			g.Expect(manifestKstatus(g, k, moduleName).Status).To(Equal(kstatus))
		}, timeout, interval).Should(Succeed())
	}
	expect(broken, v1beta2.StateError, "ContentFailed", v1beta2.ReasonProgressingWithRetry, false, status.InProgressStatus)
	g.Expect(condition(k.manifest(g, broken), v1beta2.ConditionReady).Message).To(ContainSubstring("the registry answered 404 Not Found"))
	g.Eventually(func(g Gomega) {
		g.Expect(manifestWarnings(g, kyma.ManifestName(k.name, broken))).To(ContainElement(ContainSubstring("the registry has no such layer")),
			"the raw error is in an event")
	}, timeout, interval).Should(Succeed())
	expect(conflicting, v1beta2.StateError, "OwnershipConflict", "", true, status.FailedStatus)

	// The sample operator reports what the default CR's label asks for.
	setSampleState := func(state string) {
		g.Eventually(func(g Gomega) {
			cr := &unstructured.Unstructured{}
			cr.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
			g.Expect(k.inRuntime(cr, "default")).To(Succeed())
			labels := cr.GetLabels()
			labels[samplemodules.StateLabel] = state
			cr.SetLabels(labels)
			g.Expect(k.runtime.client.Update(ctx, cr)).To(Succeed())
		}, timeout, interval).Should(Succeed())
	}
	setSampleState("Processing")
	expect(samplemodules.Sample, v1beta2.StateProcessing, "Processing", v1beta2.ReasonProgressing, false, status.InProgressStatus)
	setSampleState("Error")
	expect(samplemodules.Sample, v1beta2.StateError, "ModuleError", v1beta2.ReasonProgressingWithRetry, false, status.InProgressStatus)
	setSampleState("Ready")
	g.Eventually(func(g Gomega) {
		m := k.manifest(g, samplemodules.Sample)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateReady))
		g.Expect(condition(m, v1beta2.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(meta.FindStatusCondition(m.Status.Conditions, v1beta2.ConditionReconciling)).To(BeNil())
		g.Expect(manifestKstatus(g, k, samplemodules.Sample).Status).To(Equal(status.CurrentStatus))
	}, timeout, interval).Should(Succeed())
	k.withModules(t, module(samplemodules.Sample))
}

// manifestWarnings are the notes of the Manifest's Warning events, where
// raw error text goes: of this Manifest, not of an earlier test run's of
// the same name.
func manifestWarnings(g Gomega, name string) []string {
	m := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: name}, m)).To(Succeed())
	events, err := testenv.Events(context.Background(), env.kcpClient, "Manifest", m, "")
	g.Expect(err).NotTo(HaveOccurred())
	var notes []string
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

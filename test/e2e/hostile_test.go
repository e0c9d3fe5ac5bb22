package e2e

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/access"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
)

// A module team with bad intent (SPEC R10, "Trust boundaries"). Its module
// declares only reading ConfigMaps, installs a harmless first version, and
// then publishes a version whose content names what is not its own: another
// module's ConfigMap and the runtime owner's, a Namespace it did not create
// and an object in it, kube-system and a Deployment there, the runtime
// owner's webhook configuration, the operator's own Kyma CRD, and Pods that
// ask for another module's identity and for the operator's watcher. None of
// it is granted to the module's identity, changed or started; the module
// shows Error naming every refused object; the other module stays Ready.
func TestHostileModuleIsGrantedNothingItDoesNotOwn(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const hostile, victim = "hostile-notes", "victim-ledger"
	readConfigMaps := v1beta2.ModuleRBAC{NamespacedRules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	}}
	publishDeclaring(t, victim, "1.0.0", configMapsInSyncNamespace, v1beta2.TargetRuntime,
		configMapYAML("", "victim-ledger-settings", "owner", "victim"))
	newReleaseMeta(t, victim, map[string]string{"regular": "1.0.0"})
	publishDeclaring(t, hostile, "1.0.0", readConfigMaps, v1beta2.TargetRuntime,
		configMapYAML("", "hostile-notes", "version", "1.0.0"))
	victimIdentity := access.Identity{Module: victim, Namespace: v1beta2.DefaultRuntimeNamespace}
	publishDeclaring(t, hostile, "2.0.0", readConfigMaps, v1beta2.TargetRuntime,
		configMapYAML("", "hostile-notes", "version", "2.0.0"),
		configMapYAML("", "victim-ledger-settings", "owner", "hostile"),
		configMapYAML("", "owners-settings", "owner", "hostile"),
		namespaceYAML("owners-team"),
		configMapYAML("owners-team", "planted", "owner", "hostile"),
		namespaceYAML("kube-system"),
		deploymentYAML("kube-system", "owners-dns", ""),
		"apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: owners-webhook\nwebhooks: []\n",
		"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: kymas.operator.kyma-project.io\nspec:\n  group: operator.kyma-project.io\n  scope: Namespaced\n  names: {kind: Kyma, plural: kymas}\n  versions: []\n",
		podYAML(access.ServiceAccountNamespace, "thief", victimIdentity.ServiceAccount()),
		podYAML("", "thief", victimIdentity.ServiceAccount()),
		deploymentYAML("", "watcher-thief", "runtime-watcher"))
	newReleaseMeta(t, hostile, map[string]string{"regular": "1.0.0", "fast": "2.0.0"})

	k := newKyma(t, module(victim), module(hostile))
	rc := k.runtime.client
	owners := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owners-settings", Namespace: v1beta2.DefaultRuntimeNamespace}, Data: map[string]string{"owner": "owner"}}
	k.createInRuntime(t, owners)
	team := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "owners-team"}}
	k.createInRuntime(t, team)
	dns := &appsv1.Deployment{}
	g.Expect(decodeInto(deploymentYAML("kube-system", "owners-dns", ""), dns)).To(Succeed())
	k.createInRuntime(t, dns)
	webhook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "owners-webhook"}}
	k.createInRuntime(t, webhook)
	k.eventuallyReady(t)
	kymaCRD := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: "kymas.operator.kyma-project.io"}, kymaCRD)).To(Succeed())
	victimSettings := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(victimSettings, "victim-ledger-settings")).To(Succeed())

	k.update(t, func(kyma *v1beta2.Kyma) {
		for i := range kyma.Spec.Modules {
			if kyma.Spec.Modules[i].Name == hostile {
				kyma.Spec.Modules[i].Channel = "fast"
			}
		}
	})
	refused := []string{
		"ConfigMap kyma-system/victim-ledger-settings (module victim-ledger's)",
		"ConfigMap kyma-system/owners-settings (not created by lifecycle-manager)",
		"ConfigMap owners-team/planted (in namespace owners-team, which the module did not create)",
		"Deployment kube-system/owners-dns (not created by lifecycle-manager)",
		"MutatingWebhookConfiguration owners-webhook (not created by lifecycle-manager)",
		"CustomResourceDefinition kymas.operator.kyma-project.io (lifecycle-manager's own, not a module's)",
		"Pod lifecycle-manager-identities/thief (in the namespace of lifecycle-manager's identities)",
		"Pod kyma-system/thief (its Pods would run as ServiceAccount " + victimIdentity.ServiceAccount() + ", an identity of lifecycle-manager's)",
		"Deployment kyma-system/watcher-thief (its Pods would run as ServiceAccount runtime-watcher, an identity of lifecycle-manager's)",
	}
	g.Eventually(func(g Gomega) {
		m := k.manifest(g, hostile)
		g.Expect(m.Spec.Version).To(Equal("2.0.0"))
		ready := condition(m, "Ready")
		g.Expect(ready.Reason).To(Equal(manifest.ReasonOwnershipConflict))
		g.Expect(ready.Message).To(HavePrefix(fmt.Sprintf("%d objects of the module are not its own to write", len(refused))))
		for _, object := range refused {
			g.Expect(ready.Message).To(ContainSubstring(object))
		}
		g.Expect(k.moduleStatus(g, hostile).State).To(Equal(v1beta2.StateError))
	}, timeout, interval).Should(Succeed())
	g.Expect(k.moduleStatus(g, victim).State).To(Equal(v1beta2.StateReady), "the other module is untouched")

	// What the hostile identity may do, asked of the runtime's API server
	// as `kubectl auth can-i --as` does.
	hostileUser := access.Identity{Module: hostile, Namespace: v1beta2.DefaultRuntimeNamespace}.Username()
	canI := func(verb, group, resource, namespace, name string) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   hostileUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + access.ServiceAccountNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: resource, Namespace: namespace, Name: name,
			},
		}}
		g.Expect(rc.Create(ctx, review)).To(Succeed())
		return review.Status.Allowed
	}
	g.Expect(canI("get", "", "configmaps", "kyma-system", "anything")).To(BeTrue(), "the declared rule holds: the question can be answered yes")
	g.Expect(canI("patch", "", "configmaps", "kyma-system", "hostile-notes")).To(BeTrue(), "its own object of version 1 stays writable")
	for _, denied := range []authorizationv1.ResourceAttributes{
		{Verb: "delete", Resource: "configmaps", Namespace: "kyma-system", Name: "victim-ledger-settings"},
		{Verb: "update", Resource: "configmaps", Namespace: "kyma-system", Name: "owners-settings"},
		{Verb: "create", Resource: "configmaps", Namespace: "owners-team", Name: "planted"},
		{Verb: "delete", Resource: "namespaces", Name: "owners-team"},
		{Verb: "delete", Resource: "namespaces", Name: "kube-system"},
		{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: "kube-system", Name: "owners-dns"},
		{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: "owners-webhook"},
		{Verb: "update", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "kymas.operator.kyma-project.io"},
		{Verb: "create", Resource: "pods", Namespace: access.ServiceAccountNamespace, Name: "thief"},
		{Verb: "create", Resource: "pods", Namespace: "kyma-system", Name: "thief"},
		{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "kyma-system", Name: "watcher-thief"},
	} {
		g.Expect(canI(denied.Verb, denied.Group, denied.Resource, denied.Namespace, denied.Name)).To(BeFalse(),
			"%s %s.%s %s/%s must not be granted", denied.Verb, denied.Resource, denied.Group, denied.Namespace, denied.Name)
	}

	// Nothing was changed or started.
	unchanged := func(obj client.Object, was string) {
		g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		g.Expect(obj.GetResourceVersion()).To(Equal(was), "%T %s was written", obj, obj.GetName())
		g.Expect(obj.GetLabels()).NotTo(HaveKeyWithValue(v1beta2.ModuleNameLabel, hostile))
	}
	unchanged(owners, owners.ResourceVersion)
	unchanged(team, team.ResourceVersion)
	// The Deployment's status is the runtime's controllers' to write: its
	// generation tells whether anyone changed its spec.
	generation := dns.Generation
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(dns), dns)).To(Succeed())
	g.Expect(dns.Generation).To(Equal(generation), "Deployment kube-system/owners-dns was changed")
	g.Expect(dns.Labels).NotTo(HaveKey(v1beta2.ManagedByLabel))
	unchanged(webhook, webhook.ResourceVersion)
	unchanged(kymaCRD, kymaCRD.ResourceVersion)
	unchanged(victimSettings, victimSettings.ResourceVersion)
	g.Expect(victimSettings.Data).To(HaveKeyWithValue("owner", "victim"))
	for _, key := range []client.ObjectKey{
		{Namespace: "owners-team", Name: "planted"},
	} {
		g.Expect(apierrors.IsNotFound(rc.Get(ctx, key, &corev1.ConfigMap{}))).To(BeTrue(), "%s was created", key)
	}
	for _, key := range []client.ObjectKey{
		{Namespace: access.ServiceAccountNamespace, Name: "thief"},
		{Namespace: "kyma-system", Name: "thief"},
	} {
		g.Expect(apierrors.IsNotFound(rc.Get(ctx, key, &corev1.Pod{}))).To(BeTrue(), "Pod %s was started", key)
	}
	g.Expect(apierrors.IsNotFound(rc.Get(ctx, client.ObjectKey{Namespace: "kyma-system", Name: "watcher-thief"}, &appsv1.Deployment{}))).To(BeTrue())
	kept := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(kept, "hostile-notes")).To(Succeed())
	g.Expect(kept.Data).To(HaveKeyWithValue("version", "1.0.0"), "the refused version changed nothing of the installed one")
}

func podYAML(namespace, name, serviceAccount string) string {
	doc := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n", name)
	if namespace != "" {
		doc += fmt.Sprintf("  namespace: %s\n", namespace)
	}
	return doc + fmt.Sprintf("spec:\n  serviceAccountName: %s\n  containers: [{name: main, image: example.com/thief:1}]\n", serviceAccount)
}

func deploymentYAML(namespace, name, serviceAccount string) string {
	doc := fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n", name)
	if namespace != "" {
		doc += fmt.Sprintf("  namespace: %s\n", namespace)
	}
	spec := "spec:\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}}\n    spec:\n"
	if serviceAccount != "" {
		spec += "      serviceAccountName: " + serviceAccount + "\n"
	}
	return doc + spec + "      containers: [{name: main, image: example.com/" + name + ":1}]\n"
}

// decodeInto reads a YAML document into a typed object.
func decodeInto(doc string, obj client.Object) error {
	return yaml.UnmarshalStrict([]byte(doc), obj)
}

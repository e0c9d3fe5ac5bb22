package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/access"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// Least privilege for modules (SPEC R10): a module whose template declares
// RBAC is applied as an identity of its own, which the runtime's API server
// holds to the declared rules and the content's own objects.

// publishDeclaring pushes a module version whose template declares rbac
// (and, for control-plane, targets the control plane).
func publishDeclaring(t *testing.T, module, version string, rbac v1beta2.ModuleRBAC, target string, documents ...string) {
	t.Helper()
	g := NewWithT(t)
	content := ociartifact.Module{RawManifest: []byte(strings.Join(documents, "\n---\n"))}
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), module, version), content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	template := samplemodules.Version{Module: module, Version: version}.Template(kcpNamespace, artifact.Links)
	template.Spec.RBAC = &rbac
	template.Spec.Target = target
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
}

// configMapsInSyncNamespace is what a module that keeps its settings in
// ConfigMaps of the sync namespace declares.
var configMapsInSyncNamespace = v1beta2.ModuleRBAC{NamespacedRules: []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
}}

// A module that declares RBAC is installed as its own identity: a
// ServiceAccount in the identities namespace holding the declared rules, and the
// writes of its content's objects, by name, which status lists. Its
// content's own RBAC, within what it declares, applies. Removing the module
// removes the identity.
func TestDeclaredModuleIsWrittenAsItsOwnIdentity(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "identity-shop"
	declared := v1beta2.ModuleRBAC{
		ClusterRules:    []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}},
		NamespacedRules: configMapsInSyncNamespace.NamespacedRules,
	}
	publishDeclaring(t, name, "1.0.0", declared, v1beta2.TargetRuntime,
		namespaceYAML("identity-shop-system"),
		configMapYAML("identity-shop-system", "identity-shop-settings", "currency", "EUR"),
		configMapYAML("", "identity-shop-config", "greeting", "hello"),
		"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: identity-shop-manager\n",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: identity-shop-manager\nrules:\n  - apiGroups: [\"\"]\n    resources: [namespaces]\n    verbs: [get, list, watch]\n",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: identity-shop-manager\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: identity-shop-manager}\nsubjects: [{kind: ServiceAccount, name: identity-shop-manager, namespace: kyma-system}]\n")
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))
	k.eventuallyReady(t)

	m := k.manifest(NewWithT(t), name)
	g.Expect(m.Spec.RBAC).NotTo(BeNil(), "the Kyma controller copies the declared RBAC into the Manifest")
	g.Expect(m.Status.Access).NotTo(BeNil())
	g.Expect(m.Status.Access.Identity).To(Equal(access.ServiceAccountNamespace + "/" + name + ".kyma-system"))
	g.Expect(m.Status.Access.Writes).To(ConsistOf("configmaps", "namespaces", "serviceaccounts",
		"clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io"))

	rc := k.runtime.client
	g.Expect(rc.Get(ctx, client.ObjectKey{Namespace: access.ServiceAccountNamespace, Name: name + ".kyma-system"}, &corev1.ServiceAccount{})).To(Succeed())
	writes := &rbacv1.Role{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Namespace: "identity-shop-system", Name: "lifecycle-manager:module:kyma-system:identity-shop:writes"}, writes)).To(Succeed(),
		"writes in the Namespace the content creates are granted once it exists")
	g.Expect(writes.Rules).To(ConsistOf(rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"identity-shop-settings"},
		Verbs: []string{"get", "create", "update", "patch", "delete"},
	}))
	g.Expect(rc.Get(ctx, client.ObjectKey{Namespace: "identity-shop-system", Name: "identity-shop-settings"}, &corev1.ConfigMap{})).To(Succeed())

	k.withModules(t)
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(rc.Get(ctx, client.ObjectKey{Namespace: access.ServiceAccountNamespace, Name: name + ".kyma-system"}, &corev1.ServiceAccount{}))).To(BeTrue())
		roles := &rbacv1.ClusterRoleList{}
		g.Expect(rc.List(ctx, roles)).To(Succeed())
		for _, r := range roles.Items {
			g.Expect(r.Name).NotTo(ContainSubstring(":" + name + ":"))
		}
		ns := &corev1.Namespace{}
		err := rc.Get(ctx, client.ObjectKey{Name: "identity-shop-system"}, ns)
		g.Expect(apierrors.IsNotFound(err) || (err == nil && !ns.DeletionTimestamp.IsZero())).To(BeTrue(), "the module's Namespace is deleted")
	}, timeout, interval).Should(Succeed())
}

// A module version whose content binds cluster-admin, although its template
// declares only ConfigMaps in its namespace, is refused by the runtime's API
// server: the module shows Error naming the binding, the binding does not
// exist, nothing the module installed is removed, and the Kyma's other
// module stays Ready.
func TestModuleThatGrantsMoreThanDeclaredShowsError(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "greedy-notes"
	publishDeclaring(t, name, "1.0.0", configMapsInSyncNamespace, v1beta2.TargetRuntime,
		configMapYAML("", "greedy-notes", "version", "1.0.0"))
	publishDeclaring(t, name, "2.0.0", configMapsInSyncNamespace, v1beta2.TargetRuntime,
		configMapYAML("", "greedy-notes", "version", "2.0.0"),
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: greedy-notes-admin\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: kyma-system}]\n")
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0", "fast": "2.0.0"})
	rawModule(t, "bystander", configMapYAML("", "bystander", "key", "value"))
	k := newKyma(t, module(name), module("bystander"))
	k.eventuallyReady(t)

	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Modules[0].Channel = "fast" })
	g.Eventually(func(g Gomega) {
		m := k.manifest(g, name)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateError))
		ready := condition(m, "Ready")
		g.Expect(ready.Reason).To(Equal(manifest.ReasonAccessRefused))
		g.Expect(ready.Message).To(ContainSubstring(`clusterrolebindings.rbac.authorization.k8s.io "greedy-notes-admin"`))
		g.Expect(k.moduleStatus(g, "bystander").State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k.runtime.client.Get(ctx, client.ObjectKey{Name: "greedy-notes-admin"}, &rbacv1.ClusterRoleBinding{}))).To(BeTrue())
	g.Expect(k.inRuntime(&corev1.ConfigMap{}, "greedy-notes")).To(Succeed(), "a refused version removes nothing")
}

// A module whose operator runs in the control plane gets a kubeconfig
// Secret next to its Manifest with a token of its identity: the declared
// rights and no more. The token is renewed (the e2e operator renews it
// every few seconds) without ending the old one, and removing the module
// deletes the Secret and ends every token.
func TestControlPlaneModuleGetsARotatedKubeconfig(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "remote-ledger"
	readConfigMaps := v1beta2.ModuleRBAC{NamespacedRules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	}}
	publishDeclaring(t, name, "1.0.0", readConfigMaps, v1beta2.TargetControlPlane, configMapYAML("", "remote-ledger", "accounts", "3"))
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))
	k.eventuallyReady(t)

	secretKey := client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, name) + "-module-kubeconfig"}
	first := moduleKubeconfig(t, secretKey)
	c := runtimeClientOf(t, first)
	g.Expect(whoAmI(ctx, c)).To(Equal("system:serviceaccount:" + access.ServiceAccountNamespace + ":" + name + ".kyma-system"))
	g.Expect(c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("kyma-system"))).To(Succeed())
	g.Expect(apierrors.IsForbidden(c.List(ctx, &corev1.SecretList{}, client.InNamespace("kyma-system")))).To(BeTrue(), "only the declared rights")

	var second []byte
	g.Eventually(func(g Gomega) {
		second = moduleKubeconfig(t, secretKey)
		g.Expect(second).NotTo(Equal(first))
	}, timeout, interval).Should(Succeed(), "the token is renewed")
	for _, kubeconfig := range [][]byte{first, second} {
		g.Expect(whoAmI(ctx, runtimeClientOf(t, kubeconfig))).To(Equal("system:serviceaccount:"+access.ServiceAccountNamespace+":"+name+".kyma-system"),
			"a renewed token does not end the one before it")
	}

	k.withModules(t)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, secretKey, &corev1.Secret{}))
	}, timeout, interval).Should(BeTrue(), "the kubeconfig Secret goes with the module")
	for _, kubeconfig := range [][]byte{first, second} {
		c := runtimeClientOf(t, kubeconfig)
		// The API server caches a token's authentication for up to 10 s.
		g.Eventually(func() bool {
			_, err := whoAmI(ctx, c)
			return apierrors.IsUnauthorized(err)
		}, 30*time.Second, interval).Should(BeTrue(), "a removed module's tokens are rejected")
	}
}

func moduleKubeconfig(t *testing.T, key client.ObjectKey) []byte {
	t.Helper()
	return moduleKubeconfigOf(t, key, "remote-ledger")
}

func moduleKubeconfigOf(t *testing.T, key client.ObjectKey, module string) []byte {
	t.Helper()
	g := NewWithT(t)
	secret := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(context.Background(), key, secret)).To(Succeed())
		g.Expect(secret.Data).To(HaveKey("config"))
	}, timeout, interval).Should(Succeed())
	g.Expect(secret.Labels).To(HaveKeyWithValue(manifest.ModuleKubeconfigLabel, module))
	g.Expect(secret.Labels).NotTo(HaveKey(v1beta2.KymaNameLabel), "not the runtime's own kubeconfig Secret")
	return secret.Data["config"]
}

func runtimeClientOf(t *testing.T, kubeconfig []byte) client.Client {
	t.Helper()
	g := NewWithT(t)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.CertData).To(BeEmpty(), "the runtime's admin credential stays in the control plane")
	c, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func whoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// A module whose operator runs in the control plane keeps getting renewed
// tokens while its Manifest fails: a new version that cannot be installed
// (its content names an object of the runtime owner) must not also cut the
// module's operator off the runtime.
func TestControlPlaneModuleTokenIsRenewedWhileItsManifestFails(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "failing-ledger"
	readConfigMaps := v1beta2.ModuleRBAC{NamespacedRules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	}}
	publishDeclaring(t, name, "1.0.0", readConfigMaps, v1beta2.TargetControlPlane, configMapYAML("", name, "accounts", "3"))
	publishDeclaring(t, name, "2.0.0", readConfigMaps, v1beta2.TargetControlPlane,
		configMapYAML("", name, "accounts", "4"), configMapYAML("", name+"-owners", "taken", "yes"))
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0", "fast": "2.0.0"})
	k := newKyma(t, module(name))
	k.createInRuntime(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-owners", Namespace: v1beta2.DefaultRuntimeNamespace}})
	k.eventuallyReady(t)

	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Modules[0].Channel = "fast" })
	k.eventuallyModuleConflict(t, name, "ConfigMap kyma-system/"+name+"-owners")
	secretKey := client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, name) + "-module-kubeconfig"}
	failing := moduleKubeconfigOf(t, secretKey, name)
	g.Eventually(func(g Gomega) {
		renewed := moduleKubeconfigOf(t, secretKey, name)
		g.Expect(renewed).NotTo(Equal(failing))
		g.Expect(condition(k.manifest(g, name), "Ready").Reason).To(Equal(manifest.ReasonOwnershipConflict), "renewed while the Manifest still fails")
		user, err := whoAmI(ctx, runtimeClientOf(t, renewed))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(user).To(Equal("system:serviceaccount:" + access.ServiceAccountNamespace + ":" + name + ".kyma-system"))
	}, timeout, interval).Should(Succeed(), "the token is renewed while the install fails")
}

// Someone deletes a declared module's identity in the runtime (its
// bindings and ServiceAccount). Removing the module writes what the
// removal needs again and finishes: the module's objects and its identity
// are gone, rather than the removal being refused for ever.
func TestRemovalRebuildsADeletedIdentity(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "orphaned-notes"
	publishDeclaring(t, name, "1.0.0", configMapsInSyncNamespace, v1beta2.TargetRuntime,
		namespaceYAML(name+"-system"), configMapYAML(name+"-system", name+"-settings", "a", "1"), configMapYAML("", name, "a", "1"))
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))
	k.eventuallyReady(t)

	rc := k.runtime.client
	identity := client.MatchingLabels{"operator.kyma-project.io/module-identity": "true"}
	ofModule := func(objectName string) bool { return strings.Contains(objectName, ":"+name+":") }
	clusterBindings := &rbacv1.ClusterRoleBindingList{}
	g.Expect(rc.List(ctx, clusterBindings, identity)).To(Succeed())
	bindings := &rbacv1.RoleBindingList{}
	g.Expect(rc.List(ctx, bindings, identity)).To(Succeed())
	deleted := 0
	for i := range clusterBindings.Items {
		if ofModule(clusterBindings.Items[i].Name) {
			g.Expect(rc.Delete(ctx, &clusterBindings.Items[i])).To(Succeed())
			deleted++
		}
	}
	for i := range bindings.Items {
		if ofModule(bindings.Items[i].Name) {
			g.Expect(rc.Delete(ctx, &bindings.Items[i])).To(Succeed())
			deleted++
		}
	}
	g.Expect(deleted).To(BeNumerically(">=", 3), "the declared, cluster and namespaced writes bindings")
	g.Expect(rc.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: access.ServiceAccountNamespace, Name: name + ".kyma-system"}})).To(Succeed())

	k.withModules(t)
	k.eventuallyManifestGone(t, name)
	g.Expect(apierrors.IsNotFound(k.inRuntime(&corev1.ConfigMap{}, name))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(rc.Get(ctx, client.ObjectKey{Namespace: name + "-system", Name: name + "-settings"}, &corev1.ConfigMap{}))).To(BeTrue())
	sa := &corev1.ServiceAccount{}
	err := rc.Get(ctx, client.ObjectKey{Namespace: access.ServiceAccountNamespace, Name: name + ".kyma-system"}, sa)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the identity written for the removal goes with it: %v %+v", err, sa.ObjectMeta)
}

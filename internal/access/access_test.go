package access_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/access"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// One real kube-apiserver (with RBAC, as every runtime has) for the
// package; each test has a sync namespace and module names of its own.
var (
	scheme *k8sruntime.Scheme
	admin  client.Client
	config *rest.Config
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cp, err := testcluster.StartControlPlane(context.Background(), testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	scheme = k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	config = cp.Config()
	if admin, err = client.New(config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// module is one test's module in the runtime.
type module struct {
	id       access.Identity
	declared v1beta2.ModuleRBAC
}

func newModule(t *testing.T, name string, declared v1beta2.ModuleRBAC) module {
	t.Helper()
	// A namespace of this run's own: a rerun (-count) must not find the
	// objects an earlier run left, which are not the new module's.
	prefix := strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	prefix = strings.TrimRight(prefix[:min(len(prefix), 44)], "-") + "-"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return module{id: access.Identity{Kyma: "kyma-" + name, Module: name, Namespace: ns.Name}, declared: declared}
}

// apply applies content as the module's identity, the way the Manifest
// controller does: the identity is written first, the content through a
// client that writes as the identity, and writes in Namespaces the content
// creates are granted once they exist.
func (m module) apply(ctx context.Context, content string, inventory []v1beta2.Resource) (apply.ModuleResult, error) {
	objects := decode(content)
	mapper := admin.RESTMapper()
	owner := apply.Owner{Kyma: m.id.Kyma, Module: m.id.Module, Manifest: "kcp-system/" + m.id.Module, SyncNamespace: m.id.Namespace}
	plan, err := apply.PlanModule(ctx, admin, objects, owner, inventory)
	if err != nil {
		return apply.ModuleResult{}, err
	}
	grant, err := access.Derive(m.declared, plan.OwnNamespaces(nil), plan.Writable(), nil, inventory, mapper)
	if err != nil {
		return apply.ModuleResult{}, err
	}
	pending, err := access.Ensure(ctx, admin, m.id, grant)
	if err != nil {
		return apply.ModuleResult{}, err
	}
	applier := apply.NewApplier(access.Client(admin, m.as()), mapper)
	if len(pending) > 0 {
		applier.AfterStaged = func(ctx context.Context) error {
			_, err := access.Ensure(ctx, admin, m.id, grant)
			return err
		}
	}
	return applier.ApplyPlan(ctx, plan)
}

// as is a client that acts as the module's identity, by impersonation
// through the admin credential, as remote.Cluster.As makes it.
func (m module) as() client.Client {
	cfg := rest.CopyConfig(config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: m.id.Username()}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: admin.RESTMapper()})
	if err != nil {
		panic(err)
	}
	return c
}

// decode parses YAML documents into objects; the tests name every
// namespace, as the content pipeline does before it hands objects over.
func decode(content string) []*unstructured.Unstructured {
	var objects []*unstructured.Unstructured
	for doc := range strings.SplitSeq(content, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			panic(err)
		}
		objects = append(objects, obj)
	}
	return objects
}

// The whole shape of a real operator module applies within its grant: a
// Namespace of its own with objects in it, a CRD and an instance of it,
// the operator's ServiceAccount, ClusterRole and ClusterRoleBinding whose
// rules the template declares, and objects in the sync namespace.
func TestContentWithinItsGrantApplies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t, "shop", v1beta2.ModuleRBAC{
		ClusterRules: []rbacv1.PolicyRule{
			{APIGroups: []string{"shop.example.com"}, Resources: []string{"carts", "carts/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		},
		NamespacedRules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		},
	})
	content := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s-shop}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: carts.shop.example.com}
spec:
  group: shop.example.com
  scope: Namespaced
  names: {kind: Cart, plural: carts, singular: cart, listKind: CartList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: shop-manager, namespace: %[1]s-shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s-shop-manager}
rules:
- {apiGroups: [shop.example.com], resources: [carts], verbs: [get, list, watch, update, patch]}
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s-shop-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s-shop-manager}
subjects: [{kind: ServiceAccount, name: shop-manager, namespace: %[1]s-shop}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shop-settings, namespace: %[1]s-shop}
data: {currency: EUR}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shop-config, namespace: %[1]s}
data: {greeting: hello}
---
apiVersion: shop.example.com/v1
kind: Cart
metadata: {name: default, namespace: %[1]s}
spec: {items: 0}
`, m.id.Namespace)
	// The CRD is cluster-wide: a rerun (-count) must find it gone, not
	// left over and someone else's.
	t.Cleanup(func() {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "carts.shop.example.com"}}
		g := NewWithT(t)
		g.Expect(client.IgnoreNotFound(admin.Delete(context.Background(), crd))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(crd), crd))
		}, time.Minute, 100*time.Millisecond).Should(BeTrue(), "the test's CRD is deleted")
	})
	result, err := m.apply(ctx, content, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Inventory).To(HaveLen(8))

	cart := &unstructured.Unstructured{}
	cart.SetAPIVersion("shop.example.com/v1")
	cart.SetKind("Cart")
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: m.id.Namespace, Name: "default"}, cart)).To(Succeed())
	g.Expect(cart.Object).To(HaveKeyWithValue("spec", map[string]any{"items": int64(0)}))
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: m.id.Namespace + "-shop", Name: "shop-settings"}, &corev1.ConfigMap{})).To(Succeed())

	// Applied again, unchanged: the dry-runs are the identity's too.
	_, err = m.apply(ctx, content, result.Inventory)
	g.Expect(err).NotTo(HaveOccurred())
}

// A module that declares only ConfigMaps in its namespace cannot create a
// ClusterRole that grants more, nor bind cluster-admin: the runtime's API
// server refuses the escalation, naming the object, and what the module
// installed before stays as it is.
func TestContentCannotGrantMoreThanDeclared(t *testing.T) {
	ctx := context.Background()
	m := newModule(t, "notes", v1beta2.ModuleRBAC{NamespacedRules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}})
	good := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: notes, namespace: %s}
data: {a: "1"}
`, m.id.Namespace)
	installed, err := m.apply(ctx, good, nil)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct{ name, object, kind, objectName string }{
		{"a ClusterRole with every right", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: notes-everything}
rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]`, "clusterroles", "notes-everything"},
		{"a binding to cluster-admin", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: notes-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]`, "clusterrolebindings", "notes-admin"},
		{"a Role for Secrets in its own namespace", fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: notes-secrets, namespace: %s}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]`, m.id.Namespace), "roles", "notes-secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := m.apply(ctx, good+"---\n"+tc.object, installed.Inventory)
			g.Expect(err).To(HaveOccurred())
			forbiddenObject(g, err, tc.kind, tc.objectName)
			g.Expect(err.Error()).To(ContainSubstring("is attempting to grant RBAC permissions not currently held"))
			cm := &corev1.ConfigMap{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: m.id.Namespace, Name: "notes"}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("a", "1"))
		})
	}
}

// forbiddenObject checks that err is the API server's refusal of the named
// object, with the details the Manifest's condition names it by.
func forbiddenObject(g Gomega, err error, resource, name string) {
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	var status apierrors.APIStatus
	g.Expect(asStatus(err, &status)).To(BeTrue(), "want an API status in %v", err)
	details := status.Status().Details
	g.Expect(details).NotTo(BeNil())
	g.Expect(details.Kind).To(Equal(resource))
	g.Expect(details.Name).To(Equal(name))
}

// The identity writes the content's objects and nothing else: not an
// object of the same kind under another name in its own namespace, not an
// object in a namespace that is not the module's, and not another module's
// object, even one of a kind both modules write.
func TestWritesOutsideTheContentAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	alpha := newModule(t, "alpha", v1beta2.ModuleRBAC{})
	beta := module{id: access.Identity{Kyma: alpha.id.Kyma, Module: "beta", Namespace: alpha.id.Namespace}}
	_, err := alpha.apply(ctx, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: alpha, namespace: %s}\ndata: {owner: alpha}\n", alpha.id.Namespace), nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = beta.apply(ctx, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: beta, namespace: %s}\ndata: {owner: beta}\n", beta.id.Namespace), nil)
	g.Expect(err).NotTo(HaveOccurred())

	stray := decode(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stray, namespace: %s}\n", alpha.id.Namespace))[0]
	err = alpha.as().Apply(ctx, client.ApplyConfigurationFromUnstructured(stray), client.FieldOwner("test"))
	forbiddenObject(g, err, "configmaps", "stray")

	// Content that puts an object into a namespace it neither creates nor
	// syncs into (here the runtime's default) gets no write there.
	_, err = alpha.apply(ctx, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: alpha-elsewhere, namespace: default}\n", nil)
	forbiddenObject(g, err, "configmaps", "alpha-elsewhere")

	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: alpha.id.Namespace}}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"data":{"owner":"beta"}}`))
	forbiddenObject(g, beta.as().Patch(ctx, theirs, patch), "configmaps", "alpha")
	forbiddenObject(g, beta.as().Delete(ctx, theirs), "configmaps", "alpha")
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
	g.Expect(theirs.Data).To(HaveKeyWithValue("owner", "alpha"))
}

// A module whose operator runs in the control plane gets tokens of its
// identity. A renewed token does not end the old one (no outage while the
// operator picks up the new kubeconfig), each acts with the declared rights
// only, and removing the identity ends every token issued for it.
func TestTokensRotateAndAreRevoked(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t, "remote-shop", v1beta2.ModuleRBAC{NamespacedRules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
	}})
	_, err := m.apply(ctx, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shop, namespace: %s}\n", m.id.Namespace), nil)
	g.Expect(err).NotTo(HaveOccurred())

	first, err := access.IssueToken(ctx, admin, config, m.id, access.MinTokenTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Expires).To(BeTemporally("~", time.Now().Add(access.MinTokenTTL), time.Minute))
	g.Expect(string(first.Kubeconfig)).NotTo(ContainSubstring("client-key-data"), "the admin's credential stays out")
	second, err := access.IssueToken(ctx, admin, config, m.id, access.MinTokenTTL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Kubeconfig).NotTo(Equal(first.Kubeconfig))

	for _, token := range []access.Token{first, second} {
		c := clientOf(g, token)
		g.Expect(whoAmI(ctx, c)).To(Equal(m.id.Username()))
		g.Expect(c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(m.id.Namespace))).To(Succeed())
		g.Expect(apierrors.IsForbidden(c.List(ctx, &corev1.SecretList{}, client.InNamespace(m.id.Namespace)))).To(BeTrue())
	}

	g.Expect(access.Remove(ctx, admin, m.id)).To(Succeed())
	for _, token := range []access.Token{first, second} {
		c := clientOf(g, token)
		// The API server caches a token's authentication for up to 10 s.
		g.Eventually(func() bool {
			_, err := whoAmI(ctx, c)
			return apierrors.IsUnauthorized(err)
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(BeTrue())
	}
	roles := &rbacv1.RoleList{}
	g.Expect(admin.List(ctx, roles, client.InNamespace(m.id.Namespace))).To(Succeed())
	g.Expect(roles.Items).To(BeEmpty(), "the identity's Roles are removed with it")
}

func asStatus(err error, status *apierrors.APIStatus) bool {
	return errors.As(err, status)
}

func clientOf(g Gomega, token access.Token) client.Client {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(token.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: admin.RESTMapper()})
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

// The grant names every object of the content and of the inventory (what
// a prune may still delete), by resource and name, per namespace, in the
// module's own namespaces only; kinds
// that the content's CRDs define get their resource from the CRD, before
// the runtime serves them.
func TestDeriveNamesEveryObject(t *testing.T) {
	g := NewWithT(t)
	objects := decode(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: parcels.post.example.com}
spec:
  group: post.example.com
  scope: Namespaced
  names: {kind: Parcel, plural: parcels}
---
apiVersion: post.example.com/v1
kind: Parcel
metadata: {name: first, namespace: mail}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: mail}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: mail}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: stray, namespace: kube-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system}
`)
	inventory := []v1beta2.Resource{
		{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "mail", Name: "old"},
		{GroupVersionKind: metav1.GroupVersionKind{Group: "gone.example.com", Version: "v1", Kind: "Gone"}, Namespace: "mail", Name: "x"},
	}
	defaultCR := decode("apiVersion: post.example.com/v1\nkind: Parcel\nmetadata: {name: default, namespace: mail}\n")[0]
	grant, err := access.Derive(v1beta2.ModuleRBAC{}, []string{"mail"}, objects, defaultCR, inventory, admin.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	verbs := []string{"get", "create", "update", "patch", "delete"}
	g.Expect(grant.Cluster).To(Equal([]rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{"parcels.post.example.com"}, Verbs: verbs},
	}), "no write of Namespace kube-system: not one of the module's own namespaces")
	g.Expect(grant.Namespaced).To(HaveKeyWithValue("mail", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a", "b", "old"}, Verbs: verbs},
		{APIGroups: []string{"post.example.com"}, Resources: []string{"parcels"}, ResourceNames: []string{"default", "first"}, Verbs: verbs},
		{APIGroups: []string{"post.example.com"}, Resources: []string{"parcels"}, Verbs: []string{"create"}},
	}), "the default CR is created without a name in the request: create of its kind, in its namespace")
	g.Expect(grant.Namespaced).NotTo(HaveKey("kube-system"), "not the module's namespace: no write there")
	g.Expect(grant.Writes()).To(Equal([]string{"configmaps", "customresourcedefinitions.apiextensions.k8s.io", "parcels.post.example.com"}))
	g.Expect(grant.Hash()).NotTo(Equal(access.Grant{}.Hash()))
}

// A grant only narrows: writes granted in a namespace that a later grant
// does not cover (the module left it, or an earlier operator granted it
// from what the content named) are taken away, not left behind.
func TestEnsureTakesAwayWritesTheGrantNoLongerCovers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t, "narrowing", v1beta2.ModuleRBAC{})
	elsewhere := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "elsewhere-"}}
	g.Expect(admin.Create(ctx, elsewhere)).To(Succeed())
	t.Cleanup(func() { _ = admin.Delete(context.Background(), elsewhere) })
	write := func(name string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{name}, Verbs: []string{"get", "create", "update", "patch", "delete"}}}
	}
	wide := access.Grant{Namespaced: map[string][]rbacv1.PolicyRule{m.id.Namespace: write("own"), elsewhere.Name: write("theirs")}}
	_, err := access.Ensure(ctx, admin, m.id, wide)
	g.Expect(err).NotTo(HaveOccurred())
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: elsewhere.Name}}
	g.Expect(admin.Create(ctx, theirs)).To(Succeed())
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"data":{"by":"module"}}`))
	g.Eventually(func() error { return m.as().Patch(ctx, theirs.DeepCopy(), patch) }, 10*time.Second, 50*time.Millisecond).
		Should(Succeed(), "the wide grant holds: the test can see it go")

	narrow := access.Grant{Namespaced: map[string][]rbacv1.PolicyRule{m.id.Namespace: write("own")}}
	_, err = access.Ensure(ctx, admin, m.id, narrow)
	g.Expect(err).NotTo(HaveOccurred())
	roles := &rbacv1.RoleList{}
	g.Expect(admin.List(ctx, roles, client.InNamespace(elsewhere.Name))).To(Succeed())
	g.Expect(roles.Items).To(BeEmpty())
	bindings := &rbacv1.RoleBindingList{}
	g.Expect(admin.List(ctx, bindings, client.InNamespace(elsewhere.Name))).To(Succeed())
	g.Expect(bindings.Items).To(BeEmpty())
	g.Eventually(func() bool {
		return apierrors.IsForbidden(m.as().Patch(ctx, theirs.DeepCopy(), patch))
	}, 10*time.Second, 50*time.Millisecond).Should(BeTrue(), "the identity can no longer write there")
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
}

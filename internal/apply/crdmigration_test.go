package apply_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

func crdWith(versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: versions}}
}

func version(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage}
}

func TestDroppedStoredVersions(t *testing.T) {
	stored := func(crd *apiextensionsv1.CustomResourceDefinition, versions ...string) *apiextensionsv1.CustomResourceDefinition {
		crd.Status.StoredVersions = versions
		return crd
	}
	for _, tc := range []struct {
		name          string
		desired, live *apiextensionsv1.CustomResourceDefinition
		want          []string
	}{
		{"a new CRD", crdWith(version("v1", true)), nil, nil},
		{"every version kept", crdWith(version("v1alpha1", false), version("v1", true)),
			stored(crdWith(version("v1alpha1", true), version("v1", false)), "v1alpha1"), nil},
		{"the stored version dropped", crdWith(version("v1", true)),
			stored(crdWith(version("v1alpha1", true), version("v1", false)), "v1alpha1"), []string{"v1alpha1"}},
		{"a version dropped that nothing was stored at", crdWith(version("v1", true)),
			stored(crdWith(version("v1alpha1", false), version("v1", true)), "v1"), nil},
		{"two stored versions dropped, the live order kept", crdWith(version("v2", true)),
			stored(crdWith(version("v1alpha1", false), version("v1", false), version("v2", true)), "v1", "v1alpha1", "v2"), []string{"v1", "v1alpha1"}},
		{"a stored version no longer in the live spec", crdWith(version("v1", true)),
			stored(crdWith(version("v1", true)), "v1beta1", "v1"), []string{"v1beta1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(apply.DroppedStoredVersions(tc.desired, tc.live)).To(Equal(tc.want))
		})
	}
}

func TestBridgeCRDServesTheDroppedVersionsWithoutStoringThem(t *testing.T) {
	g := NewWithT(t)
	old := version("v1alpha1", true)
	old.Deprecated = true
	desired := crdWith(version("v1", true))
	live := crdWith(old, version("v1", false), version("v0", false))
	bridge := apply.BridgeCRD(desired, live, []string{"v1alpha1"})
	kept := old
	kept.Storage = false
	g.Expect(bridge.Spec.Versions).To(Equal([]apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), kept}),
		"only the dropped stored version comes back, as it was, not stored; v0, stored nowhere, stays dropped")
	g.Expect(desired.Spec.Versions).To(HaveLen(1), "desired is not changed")
}

func TestTrimmedStoredVersions(t *testing.T) {
	for _, tc := range []struct {
		name            string
		stored, dropped []string
		want            []string
	}{
		{"the old version goes", []string{"v1alpha1", "v1"}, []string{"v1alpha1"}, []string{"v1"}},
		{"the new one is added when missing", []string{"v1alpha1"}, []string{"v1alpha1"}, []string{"v1"}},
		{"other stored versions stay", []string{"v1beta1", "v1alpha1", "v1"}, []string{"v1alpha1"}, []string{"v1beta1", "v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(apply.TrimmedStoredVersions(tc.stored, tc.dropped, "v1")).To(Equal(tc.want))
		})
	}
}

// gizmoCRD is a CRD of group with the given versions, the first the
// storage version. Version v1 refuses a spec.size above 10 (a rule only
// the new version has); conversion is conversion (None when empty).
func gizmoCRD(group string, conversion string, versions ...string) *unstructured.Unstructured {
	var vs []string
	for i, v := range versions {
		vs = append(vs, fmt.Sprintf(`{name: %s, served: true, storage: %t, schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}}`, v, i == 0))
	}
	if conversion == "" {
		conversion = "{strategy: None}"
	}
	doc := fmt.Sprintf(`{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: gizmos.%[1]s},
spec: {group: %[1]s, names: {kind: Gizmo, listKind: GizmoList, plural: gizmos, singular: gizmo}, scope: Namespaced,
conversion: %[2]s, versions: [%[3]s]}}`, group, conversion, strings.Join(vs, ", "))
	return mustUnstructured(doc)
}

func mustUnstructured(doc string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		panic(err)
	}
	return u
}

// migrationRun makes each test's CRD group and namespaces new when the
// tests run again in the same process (go test -count).
var migrationRun atomic.Int64

// timeout is generous: the package's API server is shared with the other
// tests, on a loaded machine.
const timeout = 60 * time.Second

func liveCRD(g Gomega, name string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(runtimeClient.Get(context.Background(), client.ObjectKey{Name: name}, crd)).To(Succeed())
	return crd
}

// storedGizmos creates the CRD (v1alpha1 stored, v1 served) and n gizmos
// at v1alpha1, spread over two namespaces.
func storedGizmos(t *testing.T, group string, n int) (namespaces []string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	crd := gizmoCRD(group, "", "v1alpha1", "v1")
	g.Expect(runtimeClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.ForceOwnership, client.FieldOwner(apply.FieldManager))).To(Succeed())
	t.Cleanup(func() { _ = runtimeClient.Delete(context.Background(), crd) })
	g.Eventually(func(g Gomega) {
		live := liveCRD(g, crd.GetName())
		established := false
		for _, c := range live.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		g.Expect(established).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed())
	for _, ns := range []string{group + "-a", group + "-b"} {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(ns, ".", "-")}}
		g.Expect(runtimeClient.Create(ctx, namespace)).To(Succeed())
		namespaces = append(namespaces, namespace.Name)
	}
	for i := range n {
		obj := gizmo(group, "v1alpha1", namespaces[i%2], fmt.Sprintf("g%03d", i), i)
		// Applied (server-side), so that its managedFields name v1alpha1.
		g.Eventually(func() error {
			return runtimeClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.ForceOwnership, client.FieldOwner("someone"))
		}).WithTimeout(timeout).Should(Succeed())
	}
	return namespaces
}

func gizmo(group, version, namespace, name string, size int) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(size)}}}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: "Gizmo"})
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetLabels(map[string]string{"owner": "someone"})
	return obj
}

func discoveryHash(t *testing.T) func(context.Context, string, string, string) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(runtimeConfig)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return func(_ context.Context, group, version, plural string) (string, error) {
		list, err := dc.ServerResourcesForGroupVersion(group + "/" + version)
		if err != nil {
			return "", err
		}
		for _, r := range list.APIResources {
			if r.Name == plural {
				return r.StorageVersionHash, nil
			}
		}
		return "", fmt.Errorf("no %s", plural)
	}
}

// TestMigratorRewritesEveryStoredObject stores 130 objects at v1alpha1,
// migrates them to v1 in pages of 50, and then does what the API server
// allows only when nothing is stored at v1alpha1 any more: drops the
// version from the CRD. Every object is then read at v1 (a list fails
// when any one of them is still stored at a version the CRD lacks), with
// its labels and spec as they were.
func TestMigratorRewritesEveryStoredObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const n = 130
	group := fmt.Sprintf("migrate%d.apply.example", migrationRun.Add(1))
	namespaces := storedGizmos(t, group, n)

	desired := gizmoCRD(group, "", "v1")
	migrations, err := apply.PlanStorageMigrations(ctx, runtimeClient, []*unstructured.Unstructured{desired})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(migrations).To(HaveLen(1))
	g.Expect(migrations[0].String()).To(Equal("CRD gizmos." + group + " from version v1alpha1 to v1"))

	var progress []string
	migrator := &apply.Migrator{Client: runtimeClient, StorageHash: discoveryHash(t), PageSize: 50,
		Progress: func(_ apply.StorageMigration, rewritten, total int) {
			progress = append(progress, fmt.Sprintf("%d/%d", rewritten, total))
		}}
	rewritten, err := migrator.Migrate(ctx, migrations[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rewritten).To(Equal(n))
	g.Expect(progress).To(Equal([]string{"0/130", "50/130", "100/130", "130/130"}))
	g.Expect(liveCRD(g, "gizmos."+group).Status.StoredVersions).To(Equal([]string{"v1"}))

	// The proof: the API server accepts the CRD without v1alpha1, and every
	// object reads at v1, unchanged.
	g.Expect(runtimeClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.ForceOwnership, client.FieldOwner(apply.FieldManager))).To(Succeed())
	g.Expect(liveCRD(g, "gizmos."+group).Spec.Versions).To(HaveLen(1))
	g.Eventually(func(g Gomega) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "GizmoList"})
		g.Expect(runtimeClient.List(ctx, list)).To(Succeed())
		g.Expect(list.Items).To(HaveLen(n))
		for _, item := range list.Items {
			var i int
			_, err := fmt.Sscanf(item.GetName(), "g%03d", &i)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(item.GetLabels()).To(Equal(map[string]string{"owner": "someone"}))
			g.Expect(item.Object["spec"]).To(Equal(map[string]any{"size": int64(i)}))
		}
	}).WithTimeout(timeout).Should(Succeed())

	// Their owner can still apply them: their managedFields moved to v1.
	again := gizmo(group, "v1", namespaces[0], "g000", 42)
	g.Expect(runtimeClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(again.DeepCopy()), client.ForceOwnership, client.FieldOwner("someone"))).To(Succeed())
	g.Expect(runtimeClient.Get(ctx, client.ObjectKeyFromObject(again), again)).To(Succeed())
	g.Expect(again.Object["spec"]).To(Equal(map[string]any{"size": int64(42)}))

	// Nothing left to migrate: planned again, there is no migration.
	migrations, err = apply.PlanStorageMigrations(ctx, runtimeClient, []*unstructured.Unstructured{desired})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(migrations).To(BeEmpty())
}

// TestMigratorThatFailsPutsTheCRDBack migrates to a CRD whose conversion
// webhook does not exist: reading the first object at the new version
// fails. The migration names the object, and the CRD is as it was: the old
// version stored and in storedVersions, no webhook.
func TestMigratorThatFailsPutsTheCRDBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	group := fmt.Sprintf("broken%d.apply.example", migrationRun.Add(1))
	namespaces := storedGizmos(t, group, 3)
	before := liveCRD(g, "gizmos."+group)

	desired := gizmoCRD(group, `{strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {service: {namespace: default, name: nowhere, path: /convert}}}}`, "v1")
	migrations, err := apply.PlanStorageMigrations(ctx, runtimeClient, []*unstructured.Unstructured{desired})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(migrations).To(HaveLen(1))
	_, err = (&apply.Migrator{Client: runtimeClient, StorageHash: discoveryHash(t)}).Migrate(ctx, migrations[0])
	var objErr *apply.ObjectMigrationError
	g.Expect(err).To(BeAssignableToTypeOf(objErr))
	g.Expect(err.Error()).To(HavePrefix("rewriting Gizmo " + namespaces[0] + "/g000 (and 2 more): "))

	after := liveCRD(g, "gizmos."+group)
	g.Expect(after.Spec.Versions).To(Equal(before.Spec.Versions))
	g.Expect(after.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter))
	g.Expect(after.Status.StoredVersions).To(ContainElement("v1alpha1"))
	for i := range 3 {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Gizmo"})
		g.Expect(runtimeClient.Get(ctx, client.ObjectKey{Namespace: namespaces[i%2], Name: fmt.Sprintf("g%03d", i)}, obj)).To(Succeed())
		g.Expect(obj.Object["spec"]).To(Equal(map[string]any{"size": int64(i)}))
	}
}

// TestMigratorWithWritersMeanwhile has others write while the migration
// runs: one object is changed between the migration's read and its write
// (the write meets a conflict, and must not undo the change), one is
// deleted. The migration still succeeds, the old version can then be
// dropped (the changed object was stored at the new version by the one
// who changed it), and the change is there.
func TestMigratorWithWritersMeanwhile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	group := fmt.Sprintf("meanwhile%d.apply.example", migrationRun.Add(1))
	namespaces := storedGizmos(t, group, 6)
	changed := client.ObjectKey{Namespace: namespaces[0], Name: "g000"}
	deleted := client.ObjectKey{Namespace: namespaces[1], Name: "g001"}

	meanwhile := interceptor.NewClient(newWithWatch(t), interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			switch client.ObjectKeyFromObject(obj) {
			case changed:
				someone := gizmo(group, "v1", changed.Namespace, changed.Name, 99)
				if err := runtimeClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(someone), client.ForceOwnership, client.FieldOwner("someone")); err != nil {
					return err
				}
			case deleted:
				if err := runtimeClient.Delete(ctx, gizmo(group, "v1", deleted.Namespace, deleted.Name, 0)); err != nil {
					return err
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	desired := gizmoCRD(group, "", "v1")
	migrations, err := apply.PlanStorageMigrations(ctx, runtimeClient, []*unstructured.Unstructured{desired})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(migrations).To(HaveLen(1))
	_, err = (&apply.Migrator{Client: meanwhile, StorageHash: discoveryHash(t)}).Migrate(ctx, migrations[0])
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(runtimeClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.ForceOwnership, client.FieldOwner(apply.FieldManager))).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "GizmoList"})
		g.Expect(runtimeClient.List(ctx, list)).To(Succeed())
		g.Expect(list.Items).To(HaveLen(5))
		for _, item := range list.Items {
			if client.ObjectKeyFromObject(&item) == changed {
				g.Expect(item.Object["spec"]).To(Equal(map[string]any{"size": int64(99)}), "the migration does not undo a change made meanwhile")
			}
		}
	}).WithTimeout(timeout).Should(Succeed())
}

package intern

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// manifestJSON is a Manifest as the control plane sends it, with a default CR.
func manifestJSON(kyma, module string) []byte {
	return []byte(`{
  "apiVersion": "operator.kyma-project.io/v1beta2", "kind": "Manifest",
  "metadata": {
    "name": "` + kyma + `-` + module + `", "namespace": "kcp-system", "uid": "uid-` + kyma + `-` + module + `",
    "resourceVersion": "12345-` + kyma + `",
    "labels": {"operator.kyma-project.io/kyma-name": "` + kyma + `", "operator.kyma-project.io/module-name": "` + module + `"},
    "annotations": {"operator.kyma-project.io/template-revision": "a1b2c3/235"},
    "finalizers": ["operator.kyma-project.io/manifest"],
    "ownerReferences": [{"apiVersion": "operator.kyma-project.io/v1beta2", "kind": "Kyma", "name": "` + kyma + `", "uid": "owner-` + kyma + `", "controller": true}]
  },
  "spec": {
    "moduleName": "` + module + `", "version": "1.0.0", "remote": true,
    "resources": [{"name": "rawManifest", "link": "oci://registry.example/modules/` + module + `@sha256:9655996f4e5f7d9837969ebd300e8496b704453a41892a3720e58d85427b2995"}],
    "resource": {"apiVersion": "example.io/v1", "kind": "Sample", "metadata": {"name": "default", "uid": "cr-` + kyma + `"}, "spec": {"replicas": 1, "mode": "standard"}}
  },
  "status": {
    "state": "Ready",
    "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "Module is installed and ready", "lastTransitionTime": "2026-12-05T11:07:37Z"}],
    "synced": [{"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "` + kyma + `", "name": "` + module + `"}]
  }
}`)
}

func decodeManifest(t *testing.T, kyma, module string) *v1beta2.Manifest {
	t.Helper()
	m := &v1beta2.Manifest{}
	if err := json.Unmarshal(manifestJSON(kyma, module), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestObjectSharesTheStringsThatRepeatAndLeavesTheRest(t *testing.T) {
	g := NewWithT(t)
	table := NewTable(DefaultMaxEntries, DefaultMaxLength)
	a, b := decodeManifest(t, "kyma-1", "alpha"), decodeManifest(t, "kyma-1", "alpha")
	wantA := a.DeepCopy()
	g.Expect(same(a.Spec.Version, b.Spec.Version)).To(BeFalse(), "decoded apart, nothing is shared yet")

	table.Object(a)
	table.Object(b)

	g.Expect(equality.Semantic.DeepEqual(a, wantA)).To(BeTrue(), "interning changes no value")
	shared := map[string][2]string{
		"namespace":        {a.Namespace, b.Namespace},
		"finalizer":        {a.Finalizers[0], b.Finalizers[0]},
		"owner apiVersion": {a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion},
		"owner name":       {a.OwnerReferences[0].Name, b.OwnerReferences[0].Name},
		"version":          {a.Spec.Version, b.Spec.Version},
		"link":             {a.Spec.Resources[0].Link, b.Spec.Resources[0].Link},
		"condition":        {a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
		"synced kind":      {a.Status.Synced[0].Kind, b.Status.Synced[0].Kind},
		"annotation":       {a.Annotations["operator.kyma-project.io/template-revision"], b.Annotations["operator.kyma-project.io/template-revision"]},
		"label value":      {a.Labels["operator.kyma-project.io/kyma-name"], b.Labels["operator.kyma-project.io/kyma-name"]},
		"CR field":         {a.Spec.Resource.Object["spec"].(map[string]any)["mode"].(string), b.Spec.Resource.Object["spec"].(map[string]any)["mode"].(string)},
	}
	for what, pair := range shared {
		g.Expect(same(pair[0], pair[1])).To(BeTrue(), what+" is one copy")
	}
	for keyA := range a.Labels {
		for keyB := range b.Labels {
			if keyA == keyB {
				g.Expect(same(keyA, keyB)).To(BeTrue(), "label key %q is one copy", keyA)
			}
		}
	}
	for what, pair := range map[string][2]string{
		"name":            {a.Name, b.Name},
		"uid":             {string(a.UID), string(b.UID)},
		"resourceVersion": {a.ResourceVersion, b.ResourceVersion},
		"owner uid":       {string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID)},
	} {
		g.Expect(same(pair[0], pair[1])).To(BeFalse(), what+" is the object's own")
	}
	g.Expect(table.strings).NotTo(HaveKey(string(a.UID)), "a UID does not take a place in the table")
}

func TestUnstructuredObjectIsInternedButItsMetadataIdentity(t *testing.T) {
	g := NewWithT(t)
	table := NewTable(DefaultMaxEntries, DefaultMaxLength)
	decode := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		g.Expect(u.UnmarshalJSON(manifestJSON("kyma-2", "beta"))).To(Succeed())
		return u
	}
	a, b := decode(), decode()
	wantA := a.DeepCopy()

	table.Object(a)
	table.Object(b)

	g.Expect(a).To(Equal(wantA))
	versionOf := func(u *unstructured.Unstructured) string {
		v, _, _ := unstructured.NestedString(u.Object, "spec", "version")
		return v
	}
	g.Expect(same(versionOf(a), versionOf(b))).To(BeTrue())
	g.Expect(same(a.GetLabels()["operator.kyma-project.io/module-name"], b.GetLabels()["operator.kyma-project.io/module-name"])).To(BeTrue())
	g.Expect(table.strings).NotTo(HaveKey("uid-kyma-2-beta"))
}

// A hostile or merely long-lived fleet (names that never repeat) cannot make
// the table grow past its bound, and strings too long to be worth it stay
// out of it.
func TestTableStaysWithinItsBound(t *testing.T) {
	g := NewWithT(t)
	table := NewTable(100, 16)
	for i := range 10_000 {
		m := decodeManifest(t, "kyma-"+strconv.Itoa(i), "module-"+strconv.Itoa(i))
		m.Labels["unique-"+strconv.Itoa(i)] = strings.Repeat("x", i%32)
		table.Object(m)
		g.Expect(table.Len()).To(BeNumerically("<=", 100))
	}
	long := strings.Repeat("y", 17)
	g.Expect(same(table.String(long), long)).To(BeTrue())
	g.Expect(table.strings).NotTo(HaveKey(long))
	// After a fresh start the table shares again.
	first := table.String(strings.Clone("after-reset"))
	g.Expect(same(table.String(strings.Clone("after-reset")), first)).To(BeTrue())
}

// Informers run their transforms in goroutines of their own (run with -race).
func TestObjectIsSafeForConcurrentInformers(t *testing.T) {
	g := NewWithT(t)
	table := NewTable(64, DefaultMaxLength)
	var wg sync.WaitGroup
	results := make([]*v1beta2.Manifest, 8)
	for w := range results {
		wg.Go(func() {
			for i := range 200 {
				m := decodeManifest(t, "kyma-"+strconv.Itoa(i), "module")
				table.Object(m)
				results[w] = m
			}
		})
	}
	wg.Wait()
	for _, m := range results {
		g.Expect(m.Spec.ModuleName).To(Equal("module"))
		g.Expect(m.Labels).To(HaveKeyWithValue("operator.kyma-project.io/kyma-name", "kyma-199"))
	}
}

// The cost per cached object, paid once per watch event.
func BenchmarkObjectManifest(b *testing.B) {
	table := NewTable(DefaultMaxEntries, DefaultMaxLength)
	data := manifestJSON("kyma-1", "alpha")
	objects := make([]*v1beta2.Manifest, b.N)
	for i := range objects {
		objects[i] = &v1beta2.Manifest{}
		if err := json.Unmarshal(data, objects[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		table.Object(objects[i])
	}
}

func TestCacheTransformStripsManagedFieldsAndInterns(t *testing.T) {
	g := NewWithT(t)
	transform := CacheTransform(NewTable(DefaultMaxEntries, DefaultMaxLength))
	cached := make([]*v1beta2.Manifest, 2)
	for i := range cached {
		m := decodeManifest(t, "kyma-3", "gamma")
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "lifecycle-manager", Operation: metav1.ManagedFieldsOperationApply}}
		obj, err := transform(m)
		g.Expect(err).NotTo(HaveOccurred())
		cached[i] = obj.(*v1beta2.Manifest)
	}
	g.Expect(cached[0].ManagedFields).To(BeEmpty())
	g.Expect(same(cached[0].Spec.Resources[0].Link, cached[1].Spec.Resources[0].Link)).To(BeTrue())
}

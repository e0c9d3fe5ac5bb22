package transform_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// fuzzScope knows the kinds of runtimeScope and answers for any other kind
// too, by the length of its name, so that the fuzzer reaches the transform
// with kinds of both scopes; a kind named "Unknown…" is not known at all.
func fuzzScope() transform.ScopeFunc {
	known := runtimeScope()
	return func(gvk schema.GroupVersionKind) (bool, error) {
		if namespaced, err := known(gvk); err == nil {
			return namespaced, nil
		}
		if len(gvk.Kind) >= 7 && gvk.Kind[:7] == "Unknown" {
			return false, fmt.Errorf("no kind %s", gvk)
		}
		return len(gvk.Kind)%2 == 0, nil
	}
}

var transformSeeds = []string{
	// Content that claims another Kyma's and module's objects.
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: claims\n  labels: {app: x, tier: web, operator.kyma-project.io/kyma-name: other-kyma, operator.kyma-project.io/module-name: other}\n  annotations: {operator.kyma-project.io/owned-by: kcp-system/other-kyma-other}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: elsewhere\n  labels: {operator.kyma-project.io/managed-by: someone-else}\n",
	"apiVersion: v1\nkind: Namespace\nmetadata: {name: ns, namespace: not-for-a-namespace}\n",
	"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: x, labels: null, annotations: null}\n",
	"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, labels: {operator.kyma-project.io/debug: \"true\"}}\nspec: {template: {metadata: {labels: null}}}\n",
	"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec: {template: 5}\n",
	"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\nspec: {group: example.com, scope: Cluster, names: {kind: Thing}}\n---\napiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t, namespace: x}\n",
	"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\nspec: {group: example.com, scope: Sideways, names: {kind: Thing}}\n",
	"apiVersion: example.com/v1\nkind: UnknownKind\nmetadata: {name: u}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: oops\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {a: 1}, annotations: [x]}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: 7}\n",
}

// FuzzObjects transforms whatever Raw accepts. When the transform succeeds,
// every object carries the ownership labels and annotation, a cluster-scoped
// object has no namespace and a namespaced one has one, and the debug label
// is there exactly when debug mode is on; transforming again changes
// nothing. When it fails, it has changed nothing.
func FuzzObjects(f *testing.F) {
	versions, err := samplemodules.All()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range versions {
		for _, data := range [][]byte{v.Content.RawManifest, v.Content.CRDs, v.Content.DefaultCR} {
			if data != nil {
				f.Add(data, false, "")
				f.Add(data, true, "custom-ns")
			}
		}
	}
	for _, s := range transformSeeds {
		f.Add([]byte(s), true, "")
		f.Add([]byte(s), false, "kyma-system")
	}
	f.Fuzz(func(t *testing.T, data []byte, debug bool, defaultNamespace string) {
		objs, err := render.Raw(data)
		if err != nil || len(objs) == 0 {
			return
		}
		opts := options()
		opts.Scope = fuzzScope()
		opts.Debug = debug
		opts.DefaultNamespace = defaultNamespace
		before := deepCopy(objs)

		if err := transform.Objects(objs, opts); err != nil {
			if !equality.Semantic.DeepEqual(contents(before), contents(objs)) {
				t.Fatalf("a failed transform changed the objects: %v", err)
			}
			return
		}
		crdScope := map[schema.GroupKind]bool{}
		for _, obj := range before {
			if obj.GetKind() == "CustomResourceDefinition" && obj.GroupVersionKind().Group == "apiextensions.k8s.io" {
				group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
				kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
				scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope")
				crdScope[schema.GroupKind{Group: group, Kind: kind}] = scope == "Namespaced"
			}
		}
		for i, obj := range objs {
			checkOwnership(t, obj, opts)
			namespaced, defined := crdScope[obj.GroupVersionKind().GroupKind()]
			if !defined {
				namespaced, _ = opts.Scope(obj.GroupVersionKind())
			}
			namespace, found, err := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "namespace")
			switch {
			case err != nil:
				t.Fatalf("object %d: metadata is not an object after the transform: %v", i, obj.Object)
			case !namespaced && found:
				t.Fatalf("object %d: cluster-scoped %s keeps namespace %v", i, obj.GetKind(), namespace)
			case namespaced && (!found || namespace == ""):
				t.Fatalf("object %d: namespaced %s has no namespace", i, obj.GetKind())
			case namespaced && obj.GetNamespace() == "":
				t.Fatalf("object %d: namespaced %s has namespace %v, not a string", i, obj.GetKind(), namespace)
			}
			if _, on := obj.GetLabels()[v1beta2.DebugLabel]; on != debug {
				t.Fatalf("object %d: debug label present %v, debug mode %v", i, on, debug)
			}
		}

		once := contents(deepCopy(objs))
		if err := transform.Objects(objs, opts); err != nil {
			t.Fatalf("transforming transformed objects again fails: %v", err)
		}
		if !equality.Semantic.DeepEqual(once, contents(objs)) {
			t.Fatalf("transforming again changed the objects\nonce:  %v\ntwice: %v", once, contents(objs))
		}
	})
}

// checkOwnership fails unless obj carries the labels pruning relies on and
// the annotation that leads back to the Manifest, as strings where the API
// server and the prune selector look for them.
func checkOwnership(t *testing.T, obj *unstructured.Unstructured, opts transform.Options) {
	t.Helper()
	labels, found, err := unstructured.NestedStringMap(obj.Object, "metadata", "labels")
	if err != nil || !found {
		t.Fatalf("%s %q: no labels map after the transform (%v): %v", obj.GetKind(), obj.GetName(), err, obj.Object)
	}
	for key, want := range map[string]string{
		v1beta2.ManagedByLabel:  v1beta2.ManagedByValue,
		v1beta2.KymaNameLabel:   opts.KymaName,
		v1beta2.ModuleNameLabel: opts.ModuleName,
	} {
		if labels[key] != want {
			t.Fatalf("%s %q: label %s is %q, want %q", obj.GetKind(), obj.GetName(), key, labels[key], want)
		}
	}
	annotations, _, err := unstructured.NestedStringMap(obj.Object, "metadata", "annotations")
	if err != nil || annotations[v1beta2.OwnedByAnnotation] != opts.Manifest.String() {
		t.Fatalf("%s %q: annotation %s is %q (%v), want %q", obj.GetKind(), obj.GetName(),
			v1beta2.OwnedByAnnotation, annotations[v1beta2.OwnedByAnnotation], err, opts.Manifest.String())
	}
}

func deepCopy(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.DeepCopy())
	}
	return out
}

func contents(objs []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.Object)
	}
	return out
}

package render_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// rawSeeds are odd manifests next to the sample modules' real ones: lists,
// empty and null documents, JSON streams, anchors, documents that are not
// objects, and numbers at the edges.
var rawSeeds = []string{
	"",
	"---\n---\n",
	"null\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
	"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: b}\n",
	"apiVersion: v1\nkind: ConfigMapList\nitems: []\n",
	"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMapList\n  items:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: nested}\n",
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"}}`,
	"a: &x {apiVersion: v1}\nkind: ConfigMap\nb: *x\n",
	"- 1\n- 2\n",
	"just a string\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: oops\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {a: 1}\n",
	"apiVersion: v1\nkind: ConfigMap\nspec: {big: 18446744073709551616, small: -9223372036854775808, f: 1.5e300}\n",
	"apiVersion: 1\nkind: true\n",
	"kind: ConfigMap\nmetadata: {name: no-version}\n",
	"apiVersion: v1\nkind: List\nitems: [1, 2]\n",
	"\t- tab\n",
}

// FuzzRaw feeds Raw any bytes. Whatever it accepts must keep Raw's promises:
// every object has apiVersion and kind, no List object with items is left
// unexpanded, and writing the objects out again and parsing them gives the
// same objects (so what is applied is what the module shipped).
func FuzzRaw(f *testing.F) {
	versions, err := samplemodules.All()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range versions {
		for _, data := range [][]byte{v.Content.RawManifest, v.Content.CRDs, v.Content.DefaultCR} {
			if data != nil {
				f.Add(data)
			}
		}
	}
	for _, s := range rawSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := render.Raw(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		for i, obj := range objs {
			if obj == nil {
				t.Fatalf("object %d is nil", i)
			}
			if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
				t.Fatalf("object %d has no apiVersion or kind: %v", i, obj.Object)
			}
			if strings.HasSuffix(obj.GetKind(), "List") && obj.IsList() {
				t.Fatalf("object %d is a %s left unexpanded", i, obj.GetKind())
			}
		}

		// Round trip: each object as its own JSON document.
		var out []byte
		for _, obj := range objs {
			doc, err := json.Marshal(obj.Object)
			if err != nil {
				t.Fatalf("encoding %v: %v", obj.Object, err)
			}
			out = append(out, doc...)
			out = append(out, '\n')
		}
		again, err := render.Raw(out)
		if err != nil {
			t.Fatalf("Raw refuses its own output: %v\ninput: %q\noutput: %q", err, data, out)
		}
		if !equality.Semantic.DeepEqual(contents(objs), contents(again)) {
			t.Fatalf("round trip changed the objects\ninput: %q\nfirst:  %v\nsecond: %v", data, contents(objs), contents(again))
		}
	})
}

func contents(objs []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.Object)
	}
	return out
}

// The fuzzer's first findings: objects whose metadata the operator could not
// label were accepted (the transform then silently left them without
// ownership labels), and a List inside a List stayed a List.
func TestRawFuzzFindings(t *testing.T) {
	tests := []struct {
		name, manifest string
		kinds          []string
		err            string
	}{
		{name: "metadata not an object", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: oops\n",
			err: `document 1: ConfigMap "": metadata must be an object, not a string`},
		{name: "a label that is a number", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {tier: 1}\n",
			err: `document 1: ConfigMap "a": metadata.labels["tier"] must be a string, not a number (quote it)`},
		{name: "annotations a list", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: [x]}\n",
			err: `document 1: ConfigMap "a": metadata.annotations must map strings to strings, not be a list`},
		{name: "namespace a number", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: 7}\n",
			err: `document 1: ConfigMap "a": metadata.namespace must be a string, not a number`},
		{name: "a bad item in a List", manifest: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, labels: x}\n",
			err: `document 1: List item 1: ConfigMap "a": metadata.labels must map strings to strings, not be a string`},
		{name: "metadata null is none", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n", kinds: []string{"ConfigMap"}},
		{name: "a List in a List", manifest: rawSeeds[6], kinds: []string{"ConfigMap"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render.Raw([]byte(tt.manifest))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, obj := range objs {
				kinds = append(kinds, obj.GetKind())
			}
			if !slices.Equal(kinds, tt.kinds) {
				t.Fatalf("kinds %v, want %v", kinds, tt.kinds)
			}
		})
	}
}

package render_test

import (
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// FuzzRaw feeds Raw with the sample modules' manifests and CRDs and odd
// documents. It must never panic, and every object it returns must carry
// apiVersion and kind, as the API server needs them.
func FuzzRaw(f *testing.F) {
	versions, err := samplemodules.All()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range versions {
		for _, part := range [][]byte{v.Content.RawManifest, v.Content.CRDs, v.Content.DefaultCR} {
			if len(part) > 0 {
				f.Add(part)
			}
		}
	}
	for _, odd := range []string{
		"", "---", "---\n---\n", "null", "[]", "{}", "kind: A", "apiVersion: v1\nkind: List\nitems: [{}]",
		"apiVersion: v1\nkind: ConfigMapList\nitems: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]",
		`{"apiVersion":"v1","kind":"ConfigMap"}{"apiVersion":"v1","kind":"Secret"}`,
		"apiVersion: v1\nkind: ConfigMap\ndata: &a [*a]", "a: b: c", "\t- x", "apiVersion: 1\nkind: [x]",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {a: 1e400}",
	} {
		f.Add([]byte(odd))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := render.Raw(data)
		if err != nil {
			return
		}
		for i, obj := range objs {
			if obj == nil || obj.GetAPIVersion() == "" || obj.GetKind() == "" {
				t.Fatalf("object %d of %q lacks apiVersion or kind: %v", i, data, obj)
			}
		}
	})
}

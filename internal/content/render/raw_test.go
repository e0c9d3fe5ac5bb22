package render_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// ids names objects as kind/name, in order, for compact assertions.
func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func TestRaw(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr []string
	}{
		{name: "documents with an empty one", in: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
# nothing but a comment
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: b
---
`, want: []string{"ConfigMap/a", "Deployment/b"}},
		{name: "JSON objects", in: `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}}`,
			want: []string{"Secret/a", "Service/b"}},
		{name: "List expanded", in: `
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a}
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: b}
---
apiVersion: v1
kind: Namespace
metadata: {name: c}
`, want: []string{"ConfigMap/a", "ServiceAccount/b", "Namespace/c"}},
		{name: "a kind with an items field that is no List stays whole", in: `
apiVersion: example.com/v1
kind: Basket
metadata: {name: a}
items: [apples]
`, want: []string{"Basket/a"}},
		{name: "nothing at all", in: "", want: []string{}},
		{name: "invalid YAML", in: "apiVersion: v1\nkind: [ConfigMap\n", wantErr: []string{"document 1", "yaml"}},
		{name: "document without kind", in: `
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
apiVersion: v1
metadata: {name: b}
`, wantErr: []string{"document 2", `"b"`, "no kind"}},
		{name: "document without apiVersion or kind", in: "metadata: {name: x}\n", wantErr: []string{"document 1", "no apiVersion and no kind"}},
		{name: "document that is not an object", in: "just text\n", wantErr: []string{"document 1", "not an object"}},
		{name: "List item without kind", in: `
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a}
- apiVersion: v1
  metadata: {name: b}
`, wantErr: []string{"document 1", "List item 2", "no kind"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := render.Raw([]byte(tt.in))
			if tt.wantErr != nil {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tt.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ids(objs)).To(Equal(tt.want))
		})
	}
}

func TestRawKeepsIntegersAsInt64(t *testing.T) {
	g := NewWithT(t)
	objs, err := render.Raw([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 3}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	replicas, found, err := unstructured.NestedInt64(objs[0].Object, "spec", "replicas")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(replicas).To(Equal(int64(3)))
}

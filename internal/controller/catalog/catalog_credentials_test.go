package catalog

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// TestCopyOfStripsCredentials checks that a runtime's copy of a template
// carries no user info, query or non-pin fragment anywhere but in spec.data.
func TestCopyOfStripsCredentials(t *testing.T) {
	g := NewWithT(t)
	pin := "#sha256=" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	template := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "m-1.0.0"},
		Spec: v1beta2.ModuleTemplateSpec{
			ModuleName: "mod", Version: "1.0.0",
			Resources: []v1beta2.ContentResource{
				{Name: "rawManifest", Link: "https://user:secret@host.example/m.yaml?token=abc" + pin},
				{Name: "crds", Link: "oci://robot:pw@registry.example/modules/m:1.0.0"},
			},
			Info: &v1beta2.ModuleInfo{
				Repository:    "https://bot:secret@git.example/m.git",
				Documentation: "https://docs.example/m?X-Amz-Signature=abc",
			},
			Descriptor: runtime.RawExtension{Raw: []byte(`{"component":{"repositoryContexts":[{"baseUrl":"https://user:secret@registry.example/base?token=abc"}]}}`)},
			Data: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Sample", "spec": map[string]any{"endpoint": "https://module-own@endpoint.example/?key=kept"},
			}},
		},
	}
	u, err := copyOf(template, "ModuleTemplate", &template.Spec)
	g.Expect(err).NotTo(HaveOccurred())

	resources, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
	g.Expect(resources).To(Equal([]any{
		map[string]any{"name": "rawManifest", "link": "https://host.example/m.yaml" + pin},
		map[string]any{"name": "crds", "link": "oci://registry.example/modules/m:1.0.0"},
	}))
	repo, _, _ := unstructured.NestedString(u.Object, "spec", "info", "repository")
	g.Expect(repo).To(Equal("https://git.example/m.git"))
	docs, _, _ := unstructured.NestedString(u.Object, "spec", "info", "documentation")
	g.Expect(docs).To(Equal("https://docs.example/m"))

	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	withoutData := map[string]any{}
	for k, v := range spec {
		if k != "data" {
			withoutData[k] = v
		}
	}
	encoded, err := json.Marshal(withoutData)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(encoded)).NotTo(Or(ContainSubstring("secret"), ContainSubstring("token"), ContainSubstring("robot"), ContainSubstring("Signature")))
	g.Expect(string(encoded)).To(ContainSubstring("https://registry.example/base"), "the descriptor's URL stays, without its credentials")

	endpoint, _, _ := unstructured.NestedString(u.Object, "spec", "data", "spec", "endpoint")
	g.Expect(endpoint).To(Equal("https://module-own@endpoint.example/?key=kept"), "the default CR is installed as written anyway")
	g.Expect(template.Spec.Resources[0].Link).To(ContainSubstring("secret"), "the control plane's template is not changed")
}

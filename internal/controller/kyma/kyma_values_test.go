package kyma

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestChartValues(t *testing.T) {
	template := &v1beta2.ModuleTemplate{Spec: v1beta2.ModuleTemplateSpec{Data: &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"replicas": int64(1), "greeting": "hi", "nested": map[string]any{"a": "1", "b": "2"}},
	}}}}
	tests := []struct {
		name     string
		template *v1beta2.ModuleTemplate
		values   string
		want     string
		wantErr  string
	}{
		{name: "template values alone", template: template, want: `{"greeting":"hi","nested":{"a":"1","b":"2"},"replicas":1}`},
		{name: "override a key", template: template, values: `{"greeting":"hello"}`, want: `{"greeting":"hello","nested":{"a":"1","b":"2"},"replicas":1}`},
		{name: "nested objects merge", template: template, values: `{"nested":{"b":"3","c":"4"}}`, want: `{"greeting":"hi","nested":{"a":"1","b":"3","c":"4"},"replicas":1}`},
		{name: "a scalar replaces an object", template: template, values: `{"nested":"flat"}`, want: `{"greeting":"hi","nested":"flat","replicas":1}`},
		{name: "no template values", template: &v1beta2.ModuleTemplate{}, values: `{"x":1}`, want: `{"x":1}`},
		{name: "nothing at all", template: &v1beta2.ModuleTemplate{}},
		{name: "values not an object", template: template, values: `[1,2]`, wantErr: "values must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			module := v1beta2.Module{Name: "chart"}
			if tt.values != "" {
				module.Values = &runtime.RawExtension{Raw: []byte(tt.values)}
			}
			got, err := chartValues(tt.template, module)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got.Raw).To(MatchJSON(tt.want))
		})
	}
	g := NewWithT(t)
	g.Expect(template.Spec.Data.Object["spec"].(map[string]any)["greeting"]).To(Equal("hi"), "the template is not changed")
}

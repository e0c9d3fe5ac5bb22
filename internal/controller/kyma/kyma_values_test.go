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

func TestCheckRuntimeValues(t *testing.T) {
	allowing := func(keys ...string) *v1beta2.ModuleTemplate {
		return &v1beta2.ModuleTemplate{Spec: v1beta2.ModuleTemplateSpec{RuntimeValues: keys}}
	}
	tests := []struct {
		name     string
		template *v1beta2.ModuleTemplate
		values   string
		refused  []string // keys the message must name; none means allowed
	}{
		{name: "no values", template: allowing()},
		{name: "nothing allowed, a value set", template: allowing(), values: `{"greeting":"hi"}`, refused: []string{"greeting", "allowed: none"}},
		{name: "an allowed top-level key", template: allowing("greeting"), values: `{"greeting":"hi"}`},
		{name: "an allowed key covers its subtree", template: allowing("resources"), values: `{"resources":{"limits":{"cpu":"1"}}}`},
		{name: "an allowed dotted path", template: allowing("resources.limits"), values: `{"resources":{"limits":{"cpu":"1"}}}`},
		{name: "a sibling of an allowed path", template: allowing("resources.limits"), values: `{"resources":{"limits":{"cpu":"1"},"requests":{"cpu":"1"}}}`, refused: []string{"resources.requests"}},
		{name: "replacing the parent of an allowed path", template: allowing("resources.limits"), values: `{"resources":"none"}`, refused: []string{"resources"}},
		{name: "a key holding a dot", template: allowing("resources.limits"), values: `{"resources.limits":"x"}`, refused: []string{`"resources.limits"`}},
		{name: "several keys, sorted", template: allowing("greeting"), values: `{"image":"evil","greeting":"hi","rbac":{"create":true}}`, refused: []string{"image, rbac", "allowed: greeting"}},
		{name: "values not an object", template: allowing("greeting"), values: `"x"`, refused: []string{"must be an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			module := v1beta2.Module{Name: "chart"}
			if tt.values != "" {
				module.Values = &runtime.RawExtension{Raw: []byte(tt.values)}
			}
			err := checkRuntimeValues(tt.template, module)
			if len(tt.refused) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("module chart"))
			for _, want := range tt.refused {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

func TestRuntimeOnlyModules(t *testing.T) {
	g := NewWithT(t)
	kcp := []v1beta2.Module{{Name: "a"}, {Name: "b"}}
	runtime := []v1beta2.Module{{Name: "b"}, {Name: "c"}}
	g.Expect(runtimeOnlyModules(kcp, runtime)).To(Equal(map[string]bool{"c": true}),
		"a module both list is the control plane's entry; its values are the SRE's")
}

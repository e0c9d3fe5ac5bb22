package transform_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
)

// runtimeScope knows what a fresh runtime's discovery would tell.
func runtimeScope() transform.ScopeFunc {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "ConfigMap"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "apps", Version: "v1", Kind: "StatefulSet"},
		{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		{Group: "batch", Version: "v1", Kind: "Job"},
		{Group: "batch", Version: "v1", Kind: "CronJob"},
	} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Namespace"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	} {
		mapper.Add(gvk, meta.RESTScopeRoot)
	}
	return transform.RESTMapperScope(mapper)
}

func options() transform.Options {
	return transform.Options{
		KymaName:   "kyma-1",
		ModuleName: "sample",
		Manifest:   types.NamespacedName{Namespace: "kcp-system", Name: "kyma-1-sample"},
		Scope:      runtimeScope(),
	}
}

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

// crd defines kind in group example.com.
func crd(kind, scope string) *unstructured.Unstructured {
	const group = "example.com"
	o := object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", strings.ToLower(kind)+"s."+group)
	o.Object["spec"] = map[string]any{"group": group, "scope": scope, "names": map[string]any{"kind": kind}}
	return o
}

// workload is an apps/v1 or batch/v1 workload with a pod template.
func workload(apiVersion, kind string, podLabels map[string]any) *unstructured.Unstructured {
	o := object(apiVersion, kind, "", "w")
	o.Object["spec"] = map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": podLabels}}}
	return o
}

func TestObjectsNamespaces(t *testing.T) {
	tests := []struct {
		name             string
		objs             []*unstructured.Unstructured
		defaultNamespace string
		want             []string
	}{
		{name: "namespaced without namespace goes to kyma-system",
			objs: []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")},
			want: []string{"kyma-system"}},
		{name: "namespaced with namespace keeps it",
			objs: []*unstructured.Unstructured{object("v1", "ConfigMap", "team", "a")},
			want: []string{"team"}},
		{name: "default namespace of the runtime",
			objs:             []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")},
			defaultNamespace: "runtime-7",
			want:             []string{"runtime-7"}},
		{name: "cluster-scoped keeps none",
			objs: []*unstructured.Unstructured{
				object("v1", "Namespace", "", "a"),
				object("rbac.authorization.k8s.io/v1", "ClusterRole", "stray", "b"),
			},
			want: []string{"", ""}},
		{name: "kinds of CRDs in the batch take the CRD's scope",
			objs: []*unstructured.Unstructured{
				crd("Sample", "Namespaced"),
				crd("Setting", "Cluster"),
				object("example.com/v1", "Sample", "", "a"),
				object("example.com/v1alpha1", "Setting", "", "b"),
			},
			want: []string{"", "", "kyma-system", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := options()
			opts.DefaultNamespace = tt.defaultNamespace
			g.Expect(transform.Objects(tt.objs, opts)).To(Succeed())
			got := make([]string, 0, len(tt.objs))
			for _, o := range tt.objs {
				got = append(got, o.GetNamespace())
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestObjectsMarkOwnership(t *testing.T) {
	g := NewWithT(t)
	labelled := object("v1", "ConfigMap", "", "a")
	labelled.SetLabels(map[string]string{"app": "sample", v1beta2.ModuleNameLabel: "stale"})
	labelled.SetAnnotations(map[string]string{"note": "kept", v1beta2.AdoptAnnotation: "true", v1beta2.AdoptedAnnotation: "true"})
	objs := []*unstructured.Unstructured{labelled, object("v1", "Namespace", "", "b"), crd("Sample", "Namespaced")}

	g.Expect(transform.Objects(objs, options())).To(Succeed())

	for _, o := range objs {
		g.Expect(o.GetLabels()).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue), o.GetName())
		g.Expect(o.GetLabels()).To(HaveKeyWithValue(v1beta2.KymaNameLabel, "kyma-1"), o.GetName())
		g.Expect(o.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, "sample"), o.GetName())
		g.Expect(o.GetAnnotations()).To(HaveKeyWithValue(v1beta2.OwnedByAnnotation, "kcp-system/kyma-1-sample"), o.GetName())
	}
	g.Expect(labelled.GetLabels()).To(HaveKeyWithValue("app", "sample"))
	g.Expect(labelled.GetAnnotations()).To(HaveKeyWithValue("note", "kept"))
	g.Expect(labelled.GetAnnotations()).To(HaveKeyWithValue(v1beta2.AdoptAnnotation, "true"), "the module's permission to adopt stays")
	g.Expect(labelled.GetAnnotations()).NotTo(HaveKey(v1beta2.AdoptedAnnotation), "content cannot claim an object was adopted")
}

func TestObjectsDebug(t *testing.T) {
	app := func() map[string]any { return map[string]any{"app": "w"} }
	appAndDebug := func() map[string]any { return map[string]any{"app": "w", v1beta2.DebugLabel: "true"} }
	labelled := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		o.SetLabels(map[string]string{v1beta2.DebugLabel: "true"})
		return o
	}
	tests := []struct {
		name          string
		obj           *unstructured.Unstructured
		debug         bool
		wantPodLabels map[string]string
	}{
		{name: "Deployment on", obj: workload("apps/v1", "Deployment", app()), debug: true,
			wantPodLabels: map[string]string{"app": "w", v1beta2.DebugLabel: "true"}},
		{name: "StatefulSet without pod labels on", obj: workload("apps/v1", "StatefulSet", nil), debug: true,
			wantPodLabels: map[string]string{v1beta2.DebugLabel: "true"}},
		{name: "DaemonSet on", obj: workload("apps/v1", "DaemonSet", app()), debug: true,
			wantPodLabels: map[string]string{"app": "w", v1beta2.DebugLabel: "true"}},
		{name: "a Job's pods are left alone", obj: workload("batch/v1", "Job", app()), debug: true,
			wantPodLabels: map[string]string{"app": "w"}},
		{name: "ConfigMap on", obj: object("v1", "ConfigMap", "", "a"), debug: true},
		{name: "Deployment off removes what the content had", obj: labelled(workload("apps/v1", "Deployment", appAndDebug())),
			wantPodLabels: map[string]string{"app": "w"}},
		{name: "ConfigMap off removes what the content had", obj: labelled(object("v1", "ConfigMap", "", "a"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := options()
			opts.Debug = tt.debug
			g.Expect(transform.Objects([]*unstructured.Unstructured{tt.obj}, opts)).To(Succeed())

			if tt.debug {
				g.Expect(tt.obj.GetLabels()).To(HaveKeyWithValue(v1beta2.DebugLabel, "true"))
			} else {
				g.Expect(tt.obj.GetLabels()).NotTo(HaveKey(v1beta2.DebugLabel))
			}
			podLabels, _, err := unstructured.NestedStringMap(tt.obj.Object, "spec", "template", "metadata", "labels")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(podLabels).To(Equal(tt.wantPodLabels))
		})
	}
}

func TestObjectsErrors(t *testing.T) {
	tests := []struct {
		name   string
		objs   []*unstructured.Unstructured
		change func(*transform.Options)
		want   []string
	}{
		{name: "unknown kind",
			objs: []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a"), object("example.com/v1", "Widget", "", "w")},
			want: []string{"Widget", `"w"`, "example.com/v1"}},
		{name: "CRD with a bad scope",
			objs: []*unstructured.Unstructured{crd("Sample", "Everywhere")},
			want: []string{"samples.example.com", "Everywhere"}},
		{name: "CRD without kind",
			objs: []*unstructured.Unstructured{crd("", "Namespaced")},
			want: []string{"spec.names.kind"}},
		{name: "no scope function",
			objs:   []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")},
			change: func(o *transform.Options) { o.Scope = nil },
			want:   []string{"Scope"}},
		{name: "no Manifest",
			objs:   []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")},
			change: func(o *transform.Options) { o.Manifest = types.NamespacedName{} },
			want:   []string{"Manifest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := options()
			if tt.change != nil {
				tt.change(&opts)
			}
			before := make([]*unstructured.Unstructured, len(tt.objs))
			for i, o := range tt.objs {
				before[i] = o.DeepCopy()
			}
			err := transform.Objects(tt.objs, opts)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(tt.objs).To(Equal(before), "nothing is changed when the batch is refused")
		})
	}
}

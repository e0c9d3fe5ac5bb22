package render_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// sampleChart is a small module chart: a CRD, a Deployment driven by values,
// a ConfigMap that shows what the chart was told, and the files that must
// not come out as objects (partials, NOTES.txt, a test hook).
func sampleChart() map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: sample\nversion: 0.1.0\n",
		"values.yaml": `replicas: 1
image: example.com/sample:1.0.0
`,
		"crds/crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samples.example.com
spec:
  group: example.com
  names: {kind: Sample, plural: samples}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
`,
		"templates/_helpers.tpl": `{{- define "sample.fullname" -}}{{ .Release.Name }}-manager{{- end -}}`,
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "sample.fullname" . }}
  namespace: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: sample}
  template:
    metadata:
      labels: {app: sample}
    spec:
      containers:
      - name: manager
        image: {{ .Values.image }}
`,
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-info
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  isInstall: {{ .Release.IsInstall | quote }}
`,
		"templates/NOTES.txt": "Thank you for installing {{ .Chart.Name }}.\n",
		"templates/tests/test-connection.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
spec:
  containers: [{name: t, image: busybox}]
`,
	}
}

// packageChart writes files into a chart directory and packages it as
// helm package does.
func packageChart(t testing.TB, files map[string]string) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chart")
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	chrt, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatalf("loading chart directory: %v", err)
	}
	archive, err := chartutil.Save(chrt, t.TempDir())
	if err != nil {
		t.Fatalf("packaging chart: %v", err)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func nestedString(g Gomega, obj *unstructured.Unstructured, fields ...string) string {
	v, found, err := unstructured.NestedString(obj.Object, fields...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "%v", fields)
	return v
}

func TestHelmChart(t *testing.T) {
	archive := packageChart(t, sampleChart())
	tests := []struct {
		name          string
		opts          render.HelmOptions
		wantReplicas  int64
		wantImage     string
		wantNamespace string
		wantKube      string
	}{
		{name: "chart defaults",
			opts:         render.HelmOptions{ReleaseName: "sample-module"},
			wantReplicas: 1, wantImage: "example.com/sample:1.0.0", wantNamespace: "kyma-system", wantKube: "v1.37.0"},
		{name: "values override defaults, the rest stay",
			opts: render.HelmOptions{ReleaseName: "sample-module", Namespace: "modules",
				Values: &runtime.RawExtension{Raw: []byte(`{"replicas": 3}`)}},
			wantReplicas: 3, wantImage: "example.com/sample:1.0.0", wantNamespace: "modules", wantKube: "v1.37.0"},
		{name: "values given as an object",
			opts: render.HelmOptions{ReleaseName: "sample-module",
				Values: &runtime.RawExtension{Object: &unstructured.Unstructured{Object: map[string]any{"image": "example.com/sample:2.0.0"}}}},
			wantReplicas: 1, wantImage: "example.com/sample:2.0.0", wantNamespace: "kyma-system", wantKube: "v1.37.0"},
		{name: "null values",
			opts:         render.HelmOptions{ReleaseName: "sample-module", Values: &runtime.RawExtension{Raw: []byte("null")}, KubeVersion: "1.35.2"},
			wantReplicas: 1, wantImage: "example.com/sample:1.0.0", wantNamespace: "kyma-system", wantKube: "v1.35.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := render.HelmChart(archive, tt.opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ids(objs)).To(Equal([]string{
				"CustomResourceDefinition/samples.example.com",
				"ConfigMap/sample-module-info",
				"Deployment/sample-module-manager",
			}), "CRDs first, templates by file name, no NOTES, partials or hooks")

			configMap, deployment := objs[1], objs[2]
			g.Expect(nestedString(g, configMap, "data", "kubeVersion")).To(Equal(tt.wantKube))
			g.Expect(nestedString(g, configMap, "data", "isInstall")).To(Equal("true"))
			g.Expect(deployment.GetNamespace()).To(Equal(tt.wantNamespace))
			replicas, _, err := unstructured.NestedInt64(deployment.Object, "spec", "replicas")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(replicas).To(Equal(tt.wantReplicas))
			containers, _, err := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(containers).To(HaveLen(1))
			g.Expect(containers[0]).To(HaveKeyWithValue("image", tt.wantImage))
		})
	}
}

func TestHelmChartErrors(t *testing.T) {
	with := func(file, content string) map[string]string {
		files := sampleChart()
		files[file] = content
		return files
	}
	sample := packageChart(t, sampleChart())
	tests := []struct {
		name    string
		archive []byte
		opts    render.HelmOptions
		want    []string
	}{
		{name: "template fails", archive: packageChart(t, with("templates/broken.yaml", `{{ fail "broken on purpose" }}`)),
			want: []string{`chart "sample"`, "templates/broken.yaml", "broken on purpose"}},
		{name: "template does not parse", archive: packageChart(t, with("templates/broken.yaml", "{{ .Values.replicas ")),
			want: []string{`chart "sample"`, "templates/broken.yaml"}},
		{name: "template renders something without kind", archive: packageChart(t, with("templates/broken.yaml", "apiVersion: v1\nmetadata: {name: x}\n")),
			want: []string{`chart "sample"`, "templates/broken.yaml", "document 1", "no kind"}},
		{name: "CRD file without kind", archive: packageChart(t, with("crds/broken.yaml", "apiVersion: v1\n")),
			want: []string{`chart "sample"`, "crds/broken.yaml", "no kind"}},
		{name: "values are not an object", archive: sample,
			opts: render.HelmOptions{Values: &runtime.RawExtension{Raw: []byte(`[1, 2]`)}},
			want: []string{`chart "sample"`, "values must be a JSON object"}},
		{name: "chart needs another Kubernetes", archive: packageChart(t, with("Chart.yaml", "apiVersion: v2\nname: sample\nversion: 0.1.0\nkubeVersion: '>= 1.40.0'\n")),
			want: []string{`chart "sample"`, ">= 1.40.0", "v1.37.0"}},
		{name: "not a chart archive", archive: []byte("apiVersion: v1\nkind: ConfigMap\n"),
			want: []string{"loading Helm chart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := render.HelmChart(tt.archive, tt.opts)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

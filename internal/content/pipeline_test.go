package content_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// contentServer serves each part at /<name> over real HTTP.
func contentServer(t *testing.T, parts map[string][]byte) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := parts[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(server.Close)
	return server
}

func newPipeline(t *testing.T, server *httptest.Server) *content.Pipeline {
	t.Helper()
	opts := content.DefaultOptions()
	opts.AllowedHosts = []string{strings.TrimPrefix(server.URL, "http://")}
	p, err := content.New(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pinnedManifest is a Manifest whose resources link the server's parts,
// pinned through the pipeline as the Kyma controller pins them.
func pinnedManifest(g Gomega, p *content.Pipeline, server *httptest.Server, names ...string) *v1beta2.Manifest {
	m := &v1beta2.Manifest{}
	m.Name, m.Namespace = "kyma-1-sample", "kcp-system"
	m.Labels = map[string]string{v1beta2.KymaNameLabel: "kyma-1"}
	m.Spec.ModuleName = "sample"
	for _, name := range names {
		pinned, err := p.Pin(context.Background(), v1beta2.ContentResource{Name: name, Link: server.URL + "/" + name})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pinned.Link).To(ContainSubstring("#sha256="), "the link is pinned by digest")
		m.Spec.Resources = append(m.Spec.Resources, pinned)
	}
	return m
}

// runtimeScope is the single scope rule (transform.RESTMapperScope) over a
// mapper that knows the kinds the sample modules ship.
func runtimeScope() func(schema.GroupVersionKind) (bool, error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "ServiceAccount"}, {Version: "v1", Kind: "ConfigMap"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
	} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	} {
		mapper.Add(gvk, meta.RESTScopeRoot)
	}
	return transform.RESTMapperScope(mapper)
}

func TestRenderPutsCRDsFirstAndMarksEveryObject(t *testing.T) {
	g := NewWithT(t)
	sample, err := samplemodules.Get(samplemodules.Sample, "1.0.0")
	g.Expect(err).NotTo(HaveOccurred())
	server := contentServer(t, map[string][]byte{
		v1beta2.RawManifestResourceName: sample.Content.RawManifest,
		v1beta2.CRDsResourceName:        sample.Content.CRDs,
		"descriptor":                    []byte("informational, not YAML: {"),
	})
	p := newPipeline(t, server)
	// The CRDs come last in the template; they must still be applied first.
	m := pinnedManifest(g, p, server, v1beta2.RawManifestResourceName, "descriptor", v1beta2.CRDsResourceName)

	objs, err := p.Render(context.Background(), m, "sync-ns", runtimeScope())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).NotTo(BeEmpty())
	g.Expect(objs[0].GetKind()).To(Equal("CustomResourceDefinition"))
	kinds := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		kinds[obj.GetKind()] = obj
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(v1beta2.KymaNameLabel, "kyma-1"), obj.GetName())
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, "sample"), obj.GetName())
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue), obj.GetName())
	}
	g.Expect(kinds).To(HaveKey("ServiceAccount"))
	g.Expect(kinds["ServiceAccount"].GetNamespace()).To(Equal("sync-ns"), "a namespaced object without a namespace goes to the sync namespace")
	g.Expect(kinds).To(HaveKey("ClusterRole"))
	g.Expect(kinds["ClusterRole"].GetNamespace()).To(BeEmpty())
}

func TestRenderHelmChartWithTheManifestsValues(t *testing.T) {
	g := NewWithT(t)
	chart, err := samplemodules.Get(samplemodules.Chart, "1.0.0")
	g.Expect(err).NotTo(HaveOccurred())
	server := contentServer(t, map[string][]byte{v1beta2.HelmChartResourceName: chart.Content.HelmChart})
	p := newPipeline(t, server)
	m := pinnedManifest(g, p, server, v1beta2.HelmChartResourceName)
	m.Spec.ModuleName = "chart"
	m.Spec.Values = &runtime.RawExtension{Raw: []byte(`{"greeting":"hello from the Manifest"}`)}

	objs, err := p.Render(context.Background(), m, "sync-ns", runtimeScope())
	g.Expect(err).NotTo(HaveOccurred())
	var settings *unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "ConfigMap" {
			settings = obj
		}
	}
	g.Expect(settings).NotTo(BeNil())
	g.Expect(settings.GetName()).To(Equal("chart-settings"), "the release is named after the module")
	g.Expect(settings.GetNamespace()).To(Equal("sync-ns"))
	greeting, _, _ := unstructured.NestedString(settings.Object, "data", "greeting")
	g.Expect(greeting).To(Equal("hello from the Manifest"))
}

func TestRenderErrorsNameThePartAndAreBounded(t *testing.T) {
	parts := map[string][]byte{
		v1beta2.RawManifestResourceName: []byte("kind: [unclosed"),
		v1beta2.CRDsResourceName:        []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"),
	}
	server := contentServer(t, parts)
	tests := []struct {
		name  string
		edit  func(*v1beta2.Manifest)
		wants string
	}{
		{name: "render failure", wants: "rendering rawManifest: "},
		{name: "fetch failure", wants: "fetching crds: ", edit: func(m *v1beta2.Manifest) {
			m.Spec.Resources = []v1beta2.ContentResource{{Name: v1beta2.CRDsResourceName, Link: server.URL + "/missing#sha256=" + strings.Repeat("0", 64)}}
		}},
		{name: "long error", wants: "fetching crds: ", edit: func(m *v1beta2.Manifest) {
			m.Spec.Resources = []v1beta2.ContentResource{{Name: v1beta2.CRDsResourceName, Link: server.URL + "/" + strings.Repeat("x", 3000) + "#sha256=" + strings.Repeat("0", 64)}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPipeline(t, server)
			m := pinnedManifest(g, p, server, v1beta2.CRDsResourceName, v1beta2.RawManifestResourceName)
			if tt.edit != nil {
				tt.edit(m)
			}
			objs, err := p.Render(context.Background(), m, "sync-ns", runtimeScope())
			g.Expect(err).To(HaveOccurred())
			g.Expect(objs).To(BeNil(), "nothing half-rendered is returned")
			g.Expect(err.Error()).To(HavePrefix(tt.wants))
			g.Expect(len(err.Error())).To(BeNumerically("<=", 1024))
		})
	}
}

// endlessChart is a chart whose template would keep Helm's engine busy
// for hours.
func endlessChart(t *testing.T) []byte {
	t.Helper()
	chrt := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "endless", Version: "0.1.0"},
		Templates: []*chart.File{{
			Name: "templates/loop.yaml",
			Data: []byte(`{{- range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}`),
		}},
	}
	path, err := chartutil.Save(chrt, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A render stopped at a limit comes out of the pipeline as a refusal to
// keep in status; a pipeline that starts anew with that status (a
// restarted operator) refuses the chart without rendering it, until the
// values change.
func TestRenderRefusalCarriesOverInStatus(t *testing.T) {
	g := NewWithT(t)
	server := contentServer(t, map[string][]byte{v1beta2.HelmChartResourceName: endlessChart(t)})
	opts := content.DefaultOptions()
	opts.AllowedHosts = []string{strings.TrimPrefix(server.URL, "http://")}
	opts.RenderDeadline = 100 * time.Millisecond
	p, err := content.New(opts, nil)
	g.Expect(err).NotTo(HaveOccurred())
	m := pinnedManifest(g, p, server, v1beta2.HelmChartResourceName)

	_, err = p.Render(context.Background(), m, "sync-ns", runtimeScope())
	var refused *render.RefusedError
	g.Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
	g.Expect(refused.Before).To(BeFalse())
	g.Expect(refused.Refusal.Reason).To(Equal(v1beta2.RenderRefusalDeadline))
	g.Expect(refused.Refusal.Limit).To(Equal("100ms"))
	m.Status.RenderRefusal = &refused.Refusal

	restarted, err := content.New(opts, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = restarted.Render(context.Background(), m, "sync-ns", runtimeScope())
	g.Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
	g.Expect(refused.Before).To(BeTrue(), "refused without a render: %v", err)

	m.Spec.Values = &runtime.RawExtension{Raw: []byte(`{"other":"values"}`)}
	_, err = restarted.Render(context.Background(), m, "sync-ns", runtimeScope())
	g.Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
	g.Expect(refused.Before).To(BeFalse(), "new values are rendered: %v", err)
	g.Expect(refused.Refusal.Digest).NotTo(Equal(m.Status.RenderRefusal.Digest))
}

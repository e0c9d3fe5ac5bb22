package module_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/module"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{"kustomize module", "name: a\nversion: 1.0.0\nkustomize: config\n", ""},
		{"chart module", "name: a\nversion: 1.0.0\nchart: chart\n", ""},
		{"mandatory", "name: a\nversion: 1.0.0\nchart: chart\nmandatory: true\n", ""},
		{"no content", "name: a\nversion: 1.0.0\n", "exactly one of kustomize"},
		{"both contents", "name: a\nversion: 1.0.0\nkustomize: k\nchart: c\n", "exactly one of kustomize"},
		{"bad name", "name: A_b\nversion: 1.0.0\nkustomize: k\n", `name "A_b"`},
		{"bad version", "name: a\nversion: v1\nkustomize: k\n", "not a semantic version"},
		{"path outside", "name: a\nversion: 1.0.0\nkustomize: ../other\n", "inside the module's directory"},
		{"typo", "name: a\nversion: 1.0.0\nkustomise: k\n", "kustomise"},
		{"chart with default CR", "name: a\nversion: 1.0.0\nchart: c\ndefaultCR: cr.yaml\n", "defaultCR is not for charts"},
		{"control plane without rbac", "name: a\nversion: 1.0.0\nkustomize: k\ntarget: control-plane\n", "needs rbac"},
		{"mandatory with channel", "name: a\nversion: 1.0.0\nkustomize: k\nmandatory: true\nchannel: fast\n", "no channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg, err := module.ParseConfig([]byte(tt.yaml))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if !cfg.Mandatory {
				g.Expect(cfg.Channel).To(Equal("regular"))
			}
		})
	}
}

// The template operator builds into a raw manifest without CRDs, the CRDs
// apart, and its default CR; each renders as the operator renders it.
func TestBuildTemplateOperator(t *testing.T) {
	g := NewWithT(t)
	cfg, err := module.LoadConfig(templateoperator.Files, module.ConfigFile)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := module.Build(templateoperator.Files, cfg)
	g.Expect(err).NotTo(HaveOccurred())

	crds, err := render.Raw(m.CRDs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).To(HaveLen(1))
	g.Expect(crds[0].GetName()).To(Equal("samples.template-operator.kyma-project.io"))
	raw, err := render.Raw(m.RawManifest)
	g.Expect(err).NotTo(HaveOccurred())
	kinds := []string{}
	for _, o := range raw {
		kinds = append(kinds, o.GetKind())
	}
	g.Expect(kinds).To(ConsistOf("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"))
	cr, err := render.Raw(m.DefaultCR)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cr[0].GroupVersionKind()).To(Equal(templateoperator.GVK))

	again, err := module.Build(templateoperator.Files, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(m), "the same input builds the same bytes")
}

// build writes a layout, push sends it to a real registry and prints a
// template whose links are pinned by digest and serve the built bytes.
func TestBuildAndPush(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	registry := testregistry.Start()
	t.Cleanup(registry.Close)

	cfg, err := module.LoadConfig(templateoperator.Files, module.ConfigFile)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := module.Build(templateoperator.Files, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(t.TempDir(), "oci")
	_, err = module.WriteLayout(dir, m, cfg.Version)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = module.WriteLayout(dir, m, cfg.Version)
	g.Expect(err).NotTo(HaveOccurred(), "a layout is replaced by the next build")
	img, err := module.ReadLayout(dir)
	g.Expect(err).NotTo(HaveOccurred())

	published, err := module.Push(ctx, img, cfg, registry.Host()+"/modules", "kcp-system", ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(published.Artifact.Ref).To(HavePrefix(registry.Host() + "/modules/template-operator@sha256:"))

	tmpl := published.Template
	g.Expect(tmpl.Name).To(Equal("template-operator-1.0.0"))
	g.Expect(tmpl.Namespace).To(Equal("kcp-system"))
	g.Expect(tmpl.Spec.ModuleName).To(Equal("template-operator"))
	g.Expect(tmpl.Spec.Version).To(Equal("1.0.0"))
	g.Expect(tmpl.Spec.Manager).NotTo(BeNil())
	g.Expect(tmpl.Spec.Manager.Kind).To(Equal("Deployment"))
	g.Expect(tmpl.Spec.Manager.Group).To(Equal("apps"))
	g.Expect(tmpl.Spec.Manager.Name).To(Equal("template-operator-manager"))
	g.Expect(tmpl.Spec.RBAC).To(Equal(cfg.RBAC))
	g.Expect(tmpl.Spec.Data.GetKind()).To(Equal("Sample"))
	g.Expect(tmpl.Spec.Info.Repository).To(Equal(cfg.Info.Repository))
	want := map[string][]byte{v1beta2.RawManifestResourceName: m.RawManifest, v1beta2.CRDsResourceName: m.CRDs}
	g.Expect(tmpl.Spec.Resources).To(HaveLen(len(want)))
	for _, r := range tmpl.Spec.Resources {
		g.Expect(r.Link).To(MatchRegexp(`^oci://` + registry.Host() + `/modules/template-operator@sha256:[0-9a-f]{64}$`))
		data, err := ociartifact.FetchLayer(ctx, r.Link, ociartifact.Insecure())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(data).To(Equal(want[r.Name]), "layer %s", r.Name)
	}
	g.Expect(published.ReleaseMeta.Spec.ModuleName).To(Equal("template-operator"))
	g.Expect(published.ReleaseMeta.Spec.Channels).To(Equal([]v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "1.0.0"}}))

	text, err := module.YAML(published.Template, published.ReleaseMeta)
	g.Expect(err).NotTo(HaveOccurred())
	docs := strings.Split(string(text), "\n---\n")
	g.Expect(docs).To(HaveLen(2))
	g.Expect(string(text)).NotTo(ContainSubstring("creationTimestamp"))
	g.Expect(string(text)).NotTo(ContainSubstring("null"), "the API server refuses null for spec fields")
	var back v1beta2.ModuleTemplate
	g.Expect(yaml.UnmarshalStrict([]byte(docs[0]), &back)).To(Succeed())
	g.Expect(back.Spec.Resources).To(Equal(tmpl.Spec.Resources))
}

// A chart directory is packaged, rendered once to check it, and its
// default values become the template's data.
func TestBuildChart(t *testing.T) {
	g := NewWithT(t)
	fsys := fstest.MapFS{
		"module.yaml":                    {Data: []byte("name: web\nversion: 2.0.0\nchannel: fast\nchart: chart\nbeta: true\nmanager: {name: web}\n")},
		"chart/Chart.yaml":               {Data: []byte("apiVersion: v2\nname: web\nversion: 2.0.0\n")},
		"chart/values.yaml":              {Data: []byte("greeting: hi\n")},
		"chart/templates/configmap.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  greeting: {{ .Values.greeting }}\n")},
	}
	cfg, err := module.LoadConfig(fsys, module.ConfigFile)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := module.Build(fsys, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.HelmChart).NotTo(BeEmpty())
	g.Expect(m.RawManifest).To(BeEmpty())
	img, err := module.WriteLayout(filepath.Join(t.TempDir(), "oci"), m, cfg.Version)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := module.Template(img, cfg, "kcp-system", map[string]string{v1beta2.HelmChartResourceName: "oci://r/web@sha256:00"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tmpl.Spec.Data.Object["spec"]).To(Equal(map[string]any{"greeting": "hi"}))
	g.Expect(tmpl.Labels).To(HaveKeyWithValue(v1beta2.BetaLabel, "true"))
	g.Expect(module.ReleaseMeta(cfg, "kcp-system").Spec.Channels).To(Equal([]v1beta2.ChannelVersionAssignment{{Channel: "fast", Version: "2.0.0"}}))

	fsys["chart/templates/configmap.yaml"] = &fstest.MapFile{Data: []byte("{{ .Values.missing.key }}")}
	_, err = module.Build(fsys, cfg)
	g.Expect(err).To(MatchError(ContainSubstring("does not render")))
}

// init scaffolds a module that builds as it is, named throughout.
func TestInitScaffoldsABuildableModule(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "shop")
	files, err := module.Init(dir, "shop")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(ContainElements("module.yaml", "default-cr.yaml", "README.md", "config/kustomization.yaml"))
	cfg, err := module.LoadConfig(os.DirFS(dir), module.ConfigFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Name).To(Equal("shop"))
	m, err := module.Build(os.DirFS(dir), cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(m.CRDs)).To(ContainSubstring("name: samples.shop.kyma-project.io"))
	g.Expect(string(m.RawManifest)).To(ContainSubstring("name: shop-manager"))
	g.Expect(string(m.RawManifest)).NotTo(ContainSubstring("template-operator"))

	_, err = module.Init(dir, "shop")
	g.Expect(err).To(MatchError(ContainSubstring("not empty")))
}

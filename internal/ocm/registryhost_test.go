package ocm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm/ocmtest"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

func TestParseBase(t *testing.T) {
	tests := []struct {
		name, value, subPath string
		want                 Base
		wantErr              string
	}{
		// The values KLM's own configurations set (config/watcher_local_test,
		// tests/e2e/module_transferred_to_another_oci_registry_test.mk,
		// tests/integration/controller/kyma/suite_test.go at c5b83f1).
		{name: "KLM local, plain HTTP", value: "http://k3d-kcp-registry.localhost:5000",
			want: Base{Host: "k3d-kcp-registry.localhost:5000", PlainHTTP: true}},
		{name: "KLM transferred, https and subpath", value: "https://europe-west3-docker.pkg.dev", subPath: "sap-kyma-jellyfish-dev/restricted-market",
			want: Base{Host: "europe-west3-docker.pkg.dev", Path: "sap-kyma-jellyfish-dev/restricted-market"}},
		{name: "KLM integration, path in the host", value: "europe-west3-docker.pkg.dev/sap-kyma-jellyfish-dev/template-operator",
			want: Base{Host: "europe-west3-docker.pkg.dev", Path: "sap-kyma-jellyfish-dev/template-operator"}},
		{name: "slashes around the subpath", value: "registry.example.com/", subPath: "/prod/", want: Base{Host: "registry.example.com", Path: "prod"}},
		{name: "upper-case host", value: "Registry.Example.com:443", want: Base{Host: "registry.example.com:443"}},
		{name: "IPv6", value: "http://[::1]:5000", want: Base{Host: "[::1]:5000", PlainHTTP: true}},

		{name: "empty", value: " ", wantErr: "empty"},
		{name: "other scheme", value: "oci://registry.example.com", wantErr: "only http:// and https://"},
		{name: "user information", value: "https://user:secret@registry.example.com", wantErr: "without user information"},
		{name: "query", value: "registry.example.com?x=1", wantErr: "without user information, query"},
		{name: "path traversal", value: "registry.example.com/prod/../other", wantErr: `segment ".."`},
		{name: "path traversal in the subpath", value: "registry.example.com", subPath: "../../v2", wantErr: `segment ".."`},
		{name: "empty segment", value: "registry.example.com/prod//x", wantErr: `segment ""`},
		{name: "upper-case path", value: "registry.example.com/Prod", wantErr: `segment "Prod"`},
		{name: "port out of range", value: "registry.example.com:99999", wantErr: "not in 1-65535"},
		{name: "no host", value: "https:///prod", wantErr: "names no host"},
		{name: "not a DNS name", value: "reg_istry.example.com", wantErr: "not a DNS name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseBase(tt.value, tt.subPath)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestCheckComponentName(t *testing.T) {
	for _, good := range []string{"kyma-project.io/module/template-operator", "github.com/kyma-project/btp-manager", "kyma-project.io/module/a_b.c"} {
		if err := CheckComponentName(good); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
	for _, bad := range []string{
		"", "kyma-project.io", "template-operator", "/kyma-project.io/module/x", "kyma-project.io/module/../../../v2/_catalog",
		"kyma-project.io/module/x/..", "kyma-project.io//x", "kyma-project.io/module/x:1.0.0", "kyma-project.io/module/x@sha256:aa",
		"Kyma-Project.io/module/x", "kyma-project.io/module/x ", "https://kyma-project.io/module/x", "kyma-project.io/module/" + strings.Repeat("x", 250),
	} {
		err := CheckComponentName(bad)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is not an OCM component name") {
			t.Errorf("%q: got %v, want a refusal", bad, err)
		}
	}
}

// staticComponents names every template's component name, from source.
type staticComponents struct {
	name, source string
	err          error
}

func (s staticComponents) ComponentName(context.Context, *v1beta2.ModuleTemplate) (string, string, error) {
	return s.name, s.source, s.err
}

// bareTemplate is a ModuleTemplate as modulectl writes it for KLM 1.20 and
// later: no spec.descriptor (or an empty one), no spec.resources.
func bareTemplate(version string) *v1beta2.ModuleTemplate {
	return &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-" + version, Namespace: "kcp-system"},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: "shop", Version: version},
	}
}

// TestResourcesFromRegistryHost: a template without an embedded descriptor
// is read, as KLM reads it, from the configured registry at
// <base>/component-descriptors/<ModuleReleaseMeta's component>:<spec.version>,
// and its content is linked in that registry, whatever registry the stored
// descriptor names (KLM's "module transferred to another OCI registry").
// Each refusal says what to fix; a registry that does not answer is not
// the template's fault.
func TestResourcesFromRegistryHost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	origin, landscape := testregistry.Start(), testregistry.Start()
	t.Cleanup(origin.Close)
	t.Cleanup(landscape.Close)

	const component = "kyma-project.io/module/shop"
	manifests, err := ocmtest.TarGz(map[string][]byte{"manifests/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")})
	g.Expect(err).NotTo(HaveOccurred())
	for _, version := range []string{"1.0.0", "1.1.0+build.7"} {
		_, err = ocmtest.Push(ctx, origin.Host()+"/dev", ocmtest.ComponentVersion{Name: component, Version: version, Blobs: []ocmtest.Blob{
			{Name: "raw-manifest", Type: "directory", MediaType: "application/x-tgz", Data: manifests},
		}, External: []map[string]any{{
			"name": "module-image", "type": "ociArtifact", "relation": "external", "version": version,
			"access": map[string]any{"type": "ociArtifact", "imageReference": "europe-docker.pkg.dev/kyma-project/prod/shop:" + tagOf(version)},
		}}}, name.Insecure)
		g.Expect(err).NotTo(HaveOccurred())
		// Transferred as `ocm transfer` does: the same manifest and blobs in
		// another registry; the descriptor still names the origin.
		tag := tagOf(version)
		g.Expect(crane.Copy(origin.Host()+"/dev/component-descriptors/"+component+":"+tag,
			landscape.Host()+"/prod/kyma/component-descriptors/"+component+":"+tag, crane.Insecure)).To(Succeed())
	}
	base, err := ParseBase("http://"+landscape.Host()+"/prod", "kyma")
	g.Expect(err).NotTo(HaveOccurred())
	named := staticComponents{name: component, source: `ModuleReleaseMeta "shop"`}
	r := &Resolver{Registry: plainRegistry{allowed: landscape.Host()}, Base: &base, Components: named}

	for _, version := range []string{"1.0.0", "1.1.0+build.7"} {
		got, err := r.Resources(ctx, bareTemplate(version))
		g.Expect(err).NotTo(HaveOccurred(), version)
		g.Expect(got).To(HaveLen(1))
		g.Expect(got[0].Name).To(Equal(v1beta2.RawManifestResourceName))
		g.Expect(got[0].Link).To(HavePrefix("oci://"+landscape.Host()+"/prod/kyma/component-descriptors/"+component+"@sha256:"),
			"the content is read from the configured registry, not from the one the descriptor names")
		data, err := ociartifact.FetchLayer(ctx, got[0].Link, ociartifact.Insecure())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(data).To(Equal(manifests))
	}

	t.Run("the descriptor, for the localized images", func(t *testing.T) {
		g := NewWithT(t)
		d, err := r.Descriptor(ctx, bareTemplate("1.1.0+build.7"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Component.String()).To(Equal(component + ":1.1.0+build.7"))
		g.Expect(d.Images()).To(Equal([]string{"europe-docker.pkg.dev/kyma-project/prod/shop:1.1.0.build-build.7"}))
		embedded, err := r.Descriptor(ctx, templateWith(g, klmTgzDescriptor))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(embedded.Images()).To(Equal([]string{"europe-docker.pkg.dev/kyma-project/prod/template-operator:1.0.0"}), "an embedded descriptor is used as it is")
		_, err = (&Resolver{Registry: r.Registry, Components: named}).Descriptor(ctx, bareTemplate("1.0.0"))
		g.Expect(err).To(MatchError(ContainSubstring("set --oci-registry-host")))
	})

	t.Run("an empty descriptor is no descriptor", func(t *testing.T) {
		g := NewWithT(t)
		template := bareTemplate("1.0.0")
		template.Spec.Descriptor.Raw = []byte("{}")
		got, err := r.Resources(ctx, template)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(HaveLen(1))
	})

	refusals := []struct {
		name     string
		resolver *Resolver
		template *v1beta2.ModuleTemplate
		want     string
	}{
		{name: "no registry host configured", resolver: &Resolver{Registry: plainRegistry{}, Components: named}, template: bareTemplate("1.0.0"),
			want: "no embedded descriptor (spec.descriptor) and no spec.resources; set --oci-registry-host to the registry that holds the module's OCM component versions"},
		{name: "no ModuleReleaseMeta", resolver: &Resolver{Registry: r.Registry, Base: &base, Components: staticComponents{}}, template: bareTemplate("1.0.0"),
			want: `no ModuleReleaseMeta has spec.moduleName "shop" to name the module's OCM component`},
		{name: "ModuleReleaseMeta without a component", resolver: &Resolver{Registry: r.Registry, Base: &base, Components: staticComponents{source: `ModuleReleaseMeta "shop"`}}, template: bareTemplate("1.0.0"),
			want: `ModuleReleaseMeta "shop" names no OCM component; set its spec.ocmComponentName (e.g. kyma-project.io/module/shop)`},
		{name: "component name with path traversal", resolver: &Resolver{Registry: r.Registry, Base: &base, Components: staticComponents{name: "kyma-project.io/module/../../../../v2/_catalog", source: `ModuleReleaseMeta "shop"`}},
			template: bareTemplate("1.0.0"), want: `ModuleReleaseMeta "shop": component name "kyma-project.io/module/../../../../v2/_catalog" is not an OCM component name`},
		{name: "no version", resolver: r, template: bareTemplate(""), want: "no embedded descriptor and no spec.version"},
		{name: "version that is no tag", resolver: r, template: bareTemplate("1.0.0/../../x"), want: `version "1.0.0/../../x" cannot be an OCI tag`},
		{name: "version not in the registry", resolver: r, template: bareTemplate("9.9.9"), want: "component version kyma-project.io/module/shop:9.9.9 is not in the registry"},
		{name: "registry not allowed", resolver: &Resolver{Registry: plainRegistry{allowed: "elsewhere.example"}, Base: &base, Components: named}, template: bareTemplate("1.0.0"),
			want: "component kyma-project.io/module/shop:1.0.0: host " + landscape.Host() + " is not allowed"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := tt.resolver.Resources(ctx, tt.template)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue(), "only a new template, ModuleReleaseMeta or flag fixes it")
		})
	}

	t.Run("a failed lookup is retried", func(t *testing.T) {
		g := NewWithT(t)
		lookup := errors.New("cache not synced")
		_, err := (&Resolver{Registry: r.Registry, Base: &base, Components: staticComponents{err: lookup}}).Resources(ctx, bareTemplate("1.0.0"))
		g.Expect(errors.Is(err, lookup)).To(BeTrue())
		g.Expect(errors.Is(err, ErrInvalid)).To(BeFalse())
	})

	t.Run("registry down is not the template's fault", func(t *testing.T) {
		g := NewWithT(t)
		landscape.Stop()
		defer func() { g.Expect(landscape.Restart()).To(Succeed()) }()
		_, err := r.Resources(ctx, bareTemplate("1.0.0"))
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.Is(err, ErrInvalid)).To(BeFalse(), "retried, not reported as the template's to fix")
	})
}

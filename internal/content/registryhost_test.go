package content_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm/ocmtest"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

func registryHostOptions(t *testing.T, args ...string) content.Options {
	t.Helper()
	opts := content.DefaultOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestOCIRegistryHostFlag: --oci-registry-host takes KLM's values; one the
// operator could read two ways, or a registry the allowed hosts do not
// list (also with http://, which makes it a plain-HTTP registry), stops
// the operator with the flag's name and the reason.
func TestOCIRegistryHostFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--oci-registry-host", "http://k3d-kcp-registry.localhost:5000"},
		{"--oci-registry-host", "https://europe-west3-docker.pkg.dev", "--modules-repository-subpath", "sap-kyma-jellyfish-dev/restricted-market"},
		{"--oci-registry-host", "http://registry.local:5000/modules", "--content-allowed-hosts", "registry.local"},
		{"--oci-registry-host", "registry.local:5000", "--insecure-registries", "registry.local:5000", "--content-allowed-hosts", "other.example"},
	} {
		if _, err := content.New(registryHostOptions(t, args...), nil); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	for want, args := range map[string][]string{
		"--oci-registry-host: registry host \"ftp://registry.local\": only http:// and https://": {"--oci-registry-host", "ftp://registry.local"},
		"without user information": {"--oci-registry-host", "https://user:token@registry.local"},
		`segment ".."`:             {"--oci-registry-host", "registry.local", "--modules-repository-subpath", "prod/../../v2"},
		"--modules-repository-subpath is set without --oci-registry-host": {"--modules-repository-subpath", "prod"},
		"--oci-registry-host http://evil.example:5000: host evil.example:5000 is not an allowed content host; the operator's --content-allowed-hosts lists registry.local; list the registry there": {
			"--oci-registry-host", "http://evil.example:5000", "--content-allowed-hosts", "registry.local"},
		"host evil.example is not an allowed content host": {"--oci-registry-host", "evil.example/modules", "--content-allowed-hosts", "*.registry.local"},
	} {
		_, err := content.New(registryHostOptions(t, args...), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error with %q", args, err, want)
		}
	}
}

// components names every module's component as its ModuleReleaseMeta
// would.
type components map[string]string

func (c components) ComponentName(_ context.Context, template *v1beta2.ModuleTemplate) (string, string, error) {
	component, ok := c[template.Spec.ModuleName]
	if !ok {
		return "", "", nil
	}
	return component, `ModuleReleaseMeta "` + template.Spec.ModuleName + `"`, nil
}

// TestTemplateFromRegistryHost: with --oci-registry-host http://<registry>/<path>,
// a ModuleTemplate with neither spec.descriptor nor spec.resources is
// pinned (content.Templates, as the Kyma controller and the rollout
// planner pin) to the raw manifest of its component version in that
// registry, read over plain HTTP with no other flag, and renders. Without
// the flag the same template is refused with a message that says to set it.
func TestTemplateFromRegistryHost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	_, err := ocmtest.Push(ctx, reg.Host()+"/kyma-modules", ocmtest.ComponentVersion{
		Name: "kyma-project.io/module/shop", Version: "1.0.0",
		Blobs: []ocmtest.Blob{{Name: "raw-manifest", Type: "yaml", MediaType: "application/octet-stream",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop-config\ndata:\n  version: 1.0.0\n")}},
	}, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	template := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-1.0.0", Namespace: "kcp-system"},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: "shop", Version: "1.0.0"},
	}
	named := components{"shop": "kyma-project.io/module/shop"}

	p, err := content.New(registryHostOptions(t, "--oci-registry-host", "http://"+reg.Host(), "--modules-repository-subpath", "kyma-modules"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	templates := content.Templates{Pinner: p, Descriptors: p.Descriptors(named)}
	g.Expect(templates.FromDescriptor(template)).To(BeTrue())
	links, err := templates.Pin(ctx, template)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(links).To(ConsistOf(HaveField("Link", HavePrefix("oci://"+reg.Host()+"/kyma-modules/component-descriptors/kyma-project.io/module/shop@sha256:"))))

	m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "kyma-shop", Namespace: "kcp-system", Labels: map[string]string{v1beta2.KymaNameLabel: "kyma"}}}
	m.Spec.ModuleName = "shop"
	m.Spec.Resources = links
	objs, err := p.Render(ctx, m, "kyma-system", func(schema.GroupVersionKind) (bool, error) { return true, nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].GetName()).To(Equal("shop-config"))

	t.Run("without the flag", func(t *testing.T) {
		g := NewWithT(t)
		p, err := content.New(content.DefaultOptions(), nil)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = content.Templates{Pinner: p, Descriptors: p.Descriptors(named)}.Pin(ctx, template)
		g.Expect(err).To(MatchError(ContainSubstring("ModuleTemplate shop-1.0.0: no embedded descriptor (spec.descriptor) and no spec.resources; set --oci-registry-host")))
		g.Expect(errors.Is(err, ocm.ErrInvalid)).To(BeTrue(), "the module's Error, not a retry")
	})

	t.Run("a registry the allowed hosts do not list", func(t *testing.T) {
		g := NewWithT(t)
		_, err := content.New(registryHostOptions(t, "--oci-registry-host", "http://"+reg.Host(), "--content-allowed-hosts", "registry.example.com"), nil)
		g.Expect(err).To(MatchError(ContainSubstring("is not an allowed content host")))
	})
}

package ocm

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm/ocmtest"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

func templateWith(g Gomega, descriptor string) *v1beta2.ModuleTemplate {
	raw, err := yaml.YAMLToJSON([]byte(descriptor))
	g.Expect(err).NotTo(HaveOccurred())
	template := &v1beta2.ModuleTemplate{}
	template.Name = "template-operator-regular"
	template.Spec.Descriptor.Raw = raw
	return template
}

// plainRegistry reaches every registry over plain HTTP; allowed, when set,
// is the only host it permits.
type plainRegistry struct{ allowed string }

func (p plainRegistry) RegistryOptions(host string) ([]ociartifact.Option, error) {
	if p.allowed != "" && host != p.allowed {
		return nil, fmt.Errorf("host %s is not allowed", host)
	}
	return []ociartifact.Option{ociartifact.Insecure()}, nil
}

// shortDescriptor is what a template carries when it names the component
// version but leaves its resources to the registry.
func shortDescriptor(host, version string) string {
	return fmt.Sprintf(`
meta:
  schemaVersion: v2
component:
  name: kyma-project.io/module/shop
  version: %s
  provider: kyma-project.io
  repositoryContexts:
    - type: OCIRegistry
      baseUrl: http://%s
      subPath: ocm
      componentNameMapping: urlPath
`, version, host)
}

func TestResourcesFromTheRegistry(t *testing.T) {
	g := NewWithT(t)
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	ctx := context.Background()
	manifests, err := ocmtest.TarGz(map[string][]byte{"manifests/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")})
	g.Expect(err).NotTo(HaveOccurred())
	const component = "kyma-project.io/module/shop"
	_, err = ocmtest.Push(ctx, reg.Host()+"/ocm", ocmtest.ComponentVersion{Name: component, Version: "1.0.0+build.1", Blobs: []ocmtest.Blob{
		{Name: "raw-manifest", Type: "directory", MediaType: "application/x-tgz", Data: manifests},
		{Name: "default-cr", Type: "directory", MediaType: "application/x-tar", Data: []byte("x")},
	}}, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = ocmtest.Push(ctx, reg.Host()+"/ocm", ocmtest.ComponentVersion{Name: component, Version: "2.0.0", Blobs: []ocmtest.Blob{
		{Name: "default-cr", Type: "directory", MediaType: "application/x-tar", Data: []byte("x")},
	}}, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())

	r := &Resolver{Registry: plainRegistry{}}
	got, err := r.Resources(ctx, templateWith(g, shortDescriptor(reg.Host(), "1.0.0+build.1")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(1))
	g.Expect(got[0].Name).To(Equal(v1beta2.RawManifestResourceName))
	data, err := ociartifact.FetchLayer(ctx, got[0].Link, ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(Equal(manifests), "the link is the raw manifest's layer")

	t.Run("no such component version", func(t *testing.T) {
		g := NewWithT(t)
		_, err := r.Resources(ctx, templateWith(g, shortDescriptor(reg.Host(), "9.9.9")))
		g.Expect(err).To(MatchError(ContainSubstring("component version kyma-project.io/module/shop:9.9.9 is not in the registry")))
		g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue())
	})
	t.Run("no raw manifest", func(t *testing.T) {
		g := NewWithT(t)
		_, err := r.Resources(ctx, templateWith(g, shortDescriptor(reg.Host(), "2.0.0")))
		g.Expect(err).To(MatchError(ContainSubstring(`has no resource "raw-manifest" (it has resources default-cr)`)))
		g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue())
	})
	t.Run("registry not allowed", func(t *testing.T) {
		g := NewWithT(t)
		r := &Resolver{Registry: plainRegistry{allowed: "elsewhere.example"}}
		_, err := r.Resources(ctx, templateWith(g, shortDescriptor(reg.Host(), "1.0.0+build.1")))
		g.Expect(err).To(MatchError(ContainSubstring("is not allowed")))
		g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue())
	})
	t.Run("registry not allowed, descriptor complete", func(t *testing.T) {
		g := NewWithT(t)
		r := &Resolver{Registry: plainRegistry{allowed: "elsewhere.example"}}
		_, err := r.Resources(ctx, templateWith(g, klmDescriptor))
		g.Expect(err).To(MatchError(ContainSubstring("europe-west3-docker.pkg.dev is not allowed")))
		g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue())
	})
	t.Run("registry down is not the template's fault", func(t *testing.T) {
		g := NewWithT(t)
		reg.Stop()
		defer func() { g.Expect(reg.Restart()).To(Succeed()) }()
		_, err := r.Resources(ctx, templateWith(g, shortDescriptor(reg.Host(), "1.0.0+build.1")))
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.Is(err, ErrInvalid)).To(BeFalse(), "retried, not reported as the template's to fix")
	})
}

func TestDescriptorFromTar(t *testing.T) {
	g := NewWithT(t)
	tarred, err := ocmtest.Tar(map[string][]byte{"README": []byte("x"), "component-descriptor.yaml": []byte("meta: {}")})
	g.Expect(err).NotTo(HaveOccurred())
	got, err := descriptorFromTar(tarred)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal("meta: {}"))
	empty, err := ocmtest.Tar(map[string][]byte{"README": []byte("x")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = descriptorFromTar(empty)
	g.Expect(err).To(MatchError(ContainSubstring("holds no component-descriptor.yaml")))
}

package ocm

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// klmDescriptor is spec.descriptor as KLM's test fixtures publish it
// (tests/integration/moduletemplate in kyma-project/lifecycle-manager):
// provider as an object's JSON string, a repository context with a path in
// its baseUrl, the raw manifest as a localBlob with a global access too.
const klmDescriptor = `
component:
  componentReferences: []
  labels:
    - name: security.kyma-project.io/scan
      value: enabled
      version: v1
  name: kyma-project.io/module/template-operator
  provider: '{"name":"kyma-project.io","labels":[{"name":"kyma-project.io/built-by","value":"cli","version":"v1"}]}'
  repositoryContexts:
    - baseUrl: europe-west3-docker.pkg.dev/sap-kyma-jellyfish-dev/template-operator
      componentNameMapping: urlPath
      type: OCIRegistry
  resources:
    - access:
        globalAccess:
          digest: sha256:1ea2baf45791beafabfee533031b715af8f7a4ffdfbbf30d318f52f7652c36ca
          mediaType: application/octet-stream
          ref: europe-west3-docker.pkg.dev/sap-kyma-jellyfish-dev/template-operator/component-descriptors/kyma-project.io/module/template-operator
          size: 15217
          type: ociBlob
        localReference: sha256:1ea2baf45791beafabfee533031b715af8f7a4ffdfbbf30d318f52f7652c36ca
        mediaType: application/octet-stream
        type: localBlob
      name: raw-manifest
      relation: local
      type: yaml
      version: 1.1.1-e2e-test
  sources: []
  version: 1.1.1-e2e-test
meta:
  schemaVersion: v2
`

// klmTgzDescriptor is the later layout: baseUrl the registry alone, the
// repository in subPath, the raw manifest a tgz of a directory, a default
// CR and an external manager image.
const klmTgzDescriptor = `
component:
  name: kyma-project.io/module/template-operator
  provider: kyma-project.io
  repositoryContexts:
    - baseUrl: europe-west3-docker.pkg.dev
      componentNameMapping: urlPath
      subPath: sap-kyma-jellyfish-dev/template-operator
      type: OCIRegistry
  resources:
    - access:
        imageReference: europe-docker.pkg.dev/kyma-project/prod/template-operator:1.0.0
        type: ociArtifact
      name: module-image
      relation: external
      type: ociArtifact
      version: 1.0.0
    - access:
        localReference: sha256:d2cc278224a71384b04963a83e784da311a268a2b3fa8732bc31e70ca0c5bc52
        mediaType: application/x-tgz
        type: localBlob
      name: raw-manifest
      relation: local
      type: directory
      version: 1.0.0
    - access:
        localReference: sha256:9230471fa6a62ff7b1549e8d0e9ccb545896fabadf82d2ec4503fc798d2bcd8a
        mediaType: application/x-tar
        type: localBlob
      name: default-cr
      relation: local
      type: directory
      version: 1.0.0
  version: 1.0.0-tgz-format
meta:
  schemaVersion: v2
`

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Component
		wantErr string
	}{
		{name: "KLM fixture", in: klmDescriptor, want: Component{Name: "kyma-project.io/module/template-operator", Version: "1.1.1-e2e-test"}},
		{name: "JSON", in: `{"meta":{"schemaVersion":"v2"},"component":{"name":"kyma-project.io/module/x","version":"1.0.0"}}`,
			want: Component{Name: "kyma-project.io/module/x", Version: "1.0.0"}},
		{name: "v3alpha1", in: "apiVersion: ocm.software/v3alpha1\nkind: ComponentVersion\n", wantErr: `apiVersion "ocm.software/v3alpha1" is not supported`},
		{name: "no schema", in: "component:\n  name: a\n  version: b\n", wantErr: `schema "" is not supported`},
		{name: "no name or version", in: "meta:\n  schemaVersion: v2\ncomponent: {}\n", wantErr: "has no component.name and no component.version"},
		{name: "not YAML", in: "component: [", wantErr: "not YAML or JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d, err := Parse([]byte(tt.in))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue(), "a bad descriptor is the template's to fix")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Component.Name).To(Equal(tt.want.Name))
			g.Expect(d.Component.Version).To(Equal(tt.want.Version))
		})
	}
}

func TestRepositoryOf(t *testing.T) {
	tests := []struct {
		name     string
		contexts []RepositoryContext
		want     Repository
		wantErr  string
	}{
		{name: "path in baseUrl", contexts: []RepositoryContext{{Type: "OCIRegistry", BaseURL: "reg.example/prod/unsigned", ComponentNameMapping: "urlPath"}},
			want: Repository{Host: "reg.example", Name: "reg.example/prod/unsigned/component-descriptors/kyma-project.io/module/x"}},
		{name: "subPath, scheme and port", contexts: []RepositoryContext{{Type: "ociRegistry/v1", BaseURL: "http://localhost:5111", SubPath: "/team/"}},
			want: Repository{Host: "localhost:5111", Name: "localhost:5111/team/component-descriptors/kyma-project.io/module/x"}},
		{name: "the last context is the current one", contexts: []RepositoryContext{
			{Type: "OCIRegistry", BaseURL: "old.example"}, {Type: "OCIRegistry", BaseURL: "new.example"}},
			want: Repository{Host: "new.example", Name: "new.example/component-descriptors/kyma-project.io/module/x"}},
		{name: "none", wantErr: "names no repository"},
		{name: "other type", contexts: []RepositoryContext{{Type: "CommonTransportFormat", BaseURL: "x"}}, wantErr: `repository type "CommonTransportFormat" is not supported`},
		{name: "digest mapping", contexts: []RepositoryContext{{Type: "OCIRegistry", BaseURL: "r.example", ComponentNameMapping: "sha256-digest"}},
			wantErr: `componentNameMapping "sha256-digest" is not supported`},
		{name: "no host", contexts: []RepositoryContext{{Type: "OCIRegistry", BaseURL: "https://"}}, wantErr: "names no registry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			repo, err := repositoryOf(Component{Name: "kyma-project.io/module/x", Version: "1.0.0", RepositoryContexts: tt.contexts})
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(repo).To(Equal(tt.want))
		})
	}
}

func TestTagOf(t *testing.T) {
	g := NewWithT(t)
	g.Expect(tagOf("1.2.3")).To(Equal("1.2.3"))
	g.Expect(tagOf("1.2.3-rc.1+build.7")).To(Equal("1.2.3-rc.1.build-build.7"))
}

const digestA = "sha256:1ea2baf45791beafabfee533031b715af8f7a4ffdfbbf30d318f52f7652c36ca"

func TestContents(t *testing.T) {
	repo := Repository{Host: "reg.example", Name: "reg.example/p/component-descriptors/kyma-project.io/module/x"}
	local := func(name, mediaType string) Resource {
		return Resource{Name: name, Access: Access{Type: "localBlob", LocalReference: digestA, MediaType: mediaType}}
	}
	tests := []struct {
		name      string
		resources []Resource
		want      []v1beta2.ContentResource
		wantErr   string
	}{
		{name: "raw manifest and CRDs, other resources ignored", resources: []Resource{
			{Name: "module-image", Access: Access{Type: "ociArtifact"}},
			local("crds", "application/x-yaml"),
			local("raw-manifest", "application/x-tgz"),
			local("default-cr", "application/x-tar"),
		}, want: []v1beta2.ContentResource{
			{Name: "rawManifest", Link: "oci://" + repo.Name + "@" + digestA},
			{Name: "crds", Link: "oci://" + repo.Name + "@" + digestA},
		}},
		{name: "legacy localOciBlob", resources: []Resource{{Name: "raw-manifest", Access: Access{Type: "localOciBlob", Digest: digestA}}},
			want: []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://" + repo.Name + "@" + digestA}}},
		{name: "ociBlob elsewhere", resources: []Resource{{Name: "raw-manifest", Access: Access{Type: "ociBlob", Ref: "other.example/blobs", Digest: digestA, MediaType: "application/octet-stream"}}},
			want: []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://other.example/blobs@" + digestA}}},
		{name: "no raw manifest", resources: []Resource{local("default-cr", "application/x-tar"), local("crds", "")},
			wantErr: `component kyma-project.io/module/x:1.0.0 has no resource "raw-manifest" (it has resources crds, default-cr)`},
		{name: "unknown access type", resources: []Resource{{Name: "raw-manifest", Access: Access{Type: "s3", Ref: "x"}}},
			wantErr: `resource "raw-manifest": access type "s3" is not supported`},
		{name: "no access type", resources: []Resource{{Name: "raw-manifest"}}, wantErr: `resource "raw-manifest" has no access type`},
		{name: "unknown media type", resources: []Resource{local("raw-manifest", "application/vnd.oci.image.manifest.v1+json")},
			wantErr: `media type "application/vnd.oci.image.manifest.v1+json" is not supported`},
		{name: "bad digest", resources: []Resource{{Name: "raw-manifest", Access: Access{Type: "localBlob", LocalReference: "sha512:ab"}}},
			wantErr: `localBlob reference "sha512:ab": want sha256`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := &Descriptor{Component: Component{Name: "kyma-project.io/module/x", Version: "1.0.0", Resources: tt.resources}}
			got, err := Contents(d, repo)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(errors.Is(err, ErrInvalid)).To(BeTrue())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// The KLM fixtures' embedded descriptors are complete: their links come
// from them, pinned by their localReference, with no registry asked.
func TestResourcesFromEmbeddedKLMDescriptors(t *testing.T) {
	tests := []struct {
		name, descriptor, want string
	}{
		{name: "path in baseUrl", descriptor: klmDescriptor,
			want: "oci://europe-west3-docker.pkg.dev/sap-kyma-jellyfish-dev/template-operator/component-descriptors/kyma-project.io/module/template-operator@" + digestA},
		{name: "subPath, tgz", descriptor: klmTgzDescriptor,
			want: "oci://europe-west3-docker.pkg.dev/sap-kyma-jellyfish-dev/template-operator/component-descriptors/kyma-project.io/module/template-operator@sha256:d2cc278224a71384b04963a83e784da311a268a2b3fa8732bc31e70ca0c5bc52"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			template := templateWith(g, tt.descriptor)
			g.Expect(HasDescriptor(template)).To(BeTrue())
			r := &Resolver{} // no registry: it must not be needed
			got, err := r.Resources(t.Context(), template)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal([]v1beta2.ContentResource{{Name: v1beta2.RawManifestResourceName, Link: tt.want}}))
		})
	}
}

func TestHasDescriptor(t *testing.T) {
	g := NewWithT(t)
	for _, raw := range []string{"", "null", "{}", "  "} {
		template := &v1beta2.ModuleTemplate{}
		template.Spec.Descriptor.Raw = []byte(raw)
		g.Expect(HasDescriptor(template)).To(BeFalse(), raw)
	}
}

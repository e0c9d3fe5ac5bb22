// Package ocm reads modules published the way Kyma's lifecycle-manager
// publishes them: a ModuleTemplate whose spec.descriptor is an OCM
// component descriptor (component kyma-project.io/module/<name>) naming a
// component version in an OCI registry, whose content parts are localBlob
// resources, layers of the component version's own OCI manifest.
//
// It turns such a template into the operator's own content links
// (v1beta2.ContentResource, digest-pinned oci:// links to those layers), so
// that the Manifest and everything after it are the same as for any other
// module. It implements the published OCM specification (schema v2, the
// OCIRegistry repository mapping) and needs no OCM library.
package ocm

import (
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// ErrInvalid is the cause of every refusal that only a new ModuleTemplate
// or a new component version can fix: a descriptor that cannot be read, a
// component version the registry does not have, a resource that is missing
// or that this operator cannot read. Other errors (a registry that does not
// answer) may go away by themselves.
var ErrInvalid = errors.New("the module's OCM component descriptor cannot be used")

// invalid wraps a refusal in ErrInvalid.
func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }

func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Descriptor is an OCM component descriptor, schema v2: the parts this
// operator reads. Everything else (provider, sources, labels, references,
// signatures) is accepted and ignored.
type Descriptor struct {
	Meta      Meta      `json:"meta"`
	Component Component `json:"component"`
}

// Meta says which schema the descriptor is written in.
type Meta struct {
	SchemaVersion string `json:"schemaVersion"`
}

// Component is one component version.
type Component struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// RepositoryContexts are the repositories the component version was
	// stored in, the current one last.
	RepositoryContexts []RepositoryContext `json:"repositoryContexts,omitempty"`
	Resources          []Resource          `json:"resources,omitempty"`
}

// RepositoryContext is an OCM repository: for type OCIRegistry, an OCI
// registry and a repository prefix.
type RepositoryContext struct {
	Type                 string `json:"type"`
	BaseURL              string `json:"baseUrl,omitempty"`
	SubPath              string `json:"subPath,omitempty"`
	ComponentNameMapping string `json:"componentNameMapping,omitempty"`
}

// Resource is one artifact of a component version.
type Resource struct {
	Name     string `json:"name"`
	Type     string `json:"type,omitempty"`
	Version  string `json:"version,omitempty"`
	Relation string `json:"relation,omitempty"`
	Access   Access `json:"access"`
}

// Access says where a resource's bytes are. For localBlob, LocalReference
// is the blob's digest in the component version's repository; for ociBlob,
// Ref and Digest name a blob in any repository.
type Access struct {
	Type           string `json:"type"`
	LocalReference string `json:"localReference,omitempty"`
	MediaType      string `json:"mediaType,omitempty"`
	ReferenceName  string `json:"referenceName,omitempty"`
	Ref            string `json:"ref,omitempty"`
	Digest         string `json:"digest,omitempty"`
	// ImageReference is where an image resource (access type ociArtifact)
	// is: a full image reference.
	ImageReference string `json:"imageReference,omitempty"`
}

// Parse reads a component descriptor (YAML or JSON) and checks what the
// operator relies on: schema v2, a component name and a version.
func Parse(data []byte) (*Descriptor, error) {
	var probe struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return nil, invalid("the component descriptor is not YAML or JSON: %v", err)
	}
	if probe.APIVersion != "" {
		return nil, invalid("component descriptor apiVersion %q is not supported; publish it in schema v2 (meta.schemaVersion: v2)", probe.APIVersion)
	}
	var d Descriptor
	if err := yaml.Unmarshal(data, &d); err != nil {
		return nil, invalid("the component descriptor cannot be read: %v", err)
	}
	if d.Meta.SchemaVersion != "v2" {
		return nil, invalid("component descriptor schema %q is not supported; want meta.schemaVersion v2", d.Meta.SchemaVersion)
	}
	var missing []string
	if d.Component.Name == "" {
		missing = append(missing, "component.name")
	}
	if d.Component.Version == "" {
		missing = append(missing, "component.version")
	}
	if len(missing) > 0 {
		return nil, invalid("the component descriptor has no %s", strings.Join(missing, " and no "))
	}
	return &d, nil
}

// String names the component version as people write it.
func (c Component) String() string { return c.Name + ":" + c.Version }

// Images are the image references the descriptor's resources name (access
// by imageReference, as OCM's ociArtifact access has it), in the order
// listed, each once: the Kyma API's localized images of a module, which a
// landscape's descriptor points at its own registry.
func (d *Descriptor) Images() []string {
	var images []string
	seen := map[string]bool{}
	for _, res := range d.Component.Resources {
		ref := strings.TrimSpace(res.Access.ImageReference)
		if ref == "" || seen[ref] {
			continue
		}
		seen[ref] = true
		images = append(images, ref)
	}
	return images
}

package ocm

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// DefaultTimeout bounds reading one component version from its registry.
const DefaultTimeout = time.Minute

// Registry gives the options to read a registry as module content is read
// (allowed hosts, insecure registries, credentials, size caps); the content
// pipeline's fetcher is one. It refuses a host content may not come from.
type Registry interface {
	RegistryOptions(host string) ([]ociartifact.Option, error)
}

// Resolver turns ModuleTemplates written with an OCM component descriptor
// into content links.
type Resolver struct {
	Registry Registry
	// Timeout bounds one registry read; DefaultTimeout when zero.
	Timeout time.Duration
	// Base, when set, is the registry that holds the component versions
	// of templates without an embedded descriptor (--oci-registry-host);
	// Components names their components. Without it such a template is
	// refused with a message that says to set it.
	Base       *Base
	Components ComponentNames
}

func (r *Resolver) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

// HasDescriptor reports whether a template carries a component descriptor
// (spec.descriptor).
func HasDescriptor(template *v1beta2.ModuleTemplate) bool {
	raw := bytes.TrimSpace(template.Spec.Descriptor.Raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null")) && !bytes.Equal(raw, []byte("{}"))
}

// Resources returns the content parts of the component version a
// template's descriptor names, as digest-pinned oci:// links to its
// localBlob layers. A descriptor that lists the resources already (as KLM's
// published templates do) is used as it is, without asking the registry:
// the links are pinned by the digests it gives, and the content is
// verified against them when fetched. One that lists none is looked up in
// its registry. Errors that only a new template or component version can
// fix wrap ErrInvalid. A template without an embedded descriptor is read
// from the configured registry (Base), as KLM reads it.
func (r *Resolver) Resources(ctx context.Context, template *v1beta2.ModuleTemplate) ([]v1beta2.ContentResource, error) {
	if !HasDescriptor(template) {
		return r.fromRegistryHost(ctx, template)
	}
	d, err := Parse(template.Spec.Descriptor.Raw)
	if err != nil {
		return nil, err
	}
	repo, err := repositoryOf(d.Component)
	if err != nil {
		return nil, err
	}
	var opts []ociartifact.Option
	if r.Registry != nil {
		// A registry content may not come from is refused here, before a
		// Manifest links it.
		if opts, err = r.Registry.RegistryOptions(repo.Host); err != nil {
			return nil, invalid("component %s: %v", d.Component, err)
		}
	}
	if complete(d) {
		return Contents(d, repo)
	}
	if r.Registry == nil {
		return nil, fmt.Errorf("component %s: no registry access configured", d.Component)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	stored, err := readComponentVersion(ctx, repo, d.Component.Name, d.Component.Version, opts)
	if err != nil {
		return nil, err
	}
	return Contents(stored, repo)
}

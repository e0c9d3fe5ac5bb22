package content

import (
	"context"
	"fmt"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
)

// LinkPinner turns a content link into a digest-pinned one (Pipeline.Pin).
type LinkPinner interface {
	Pin(ctx context.Context, resource v1beta2.ContentResource) (v1beta2.ContentResource, error)
}

// Descriptors derives the content links of a ModuleTemplate written the
// KLM way, with an OCM component descriptor (embedded, or found in a
// configured registry) and no spec.resources (internal/ocm). Its errors that only a new template can fix wrap
// ocm.ErrInvalid.
type Descriptors interface {
	Resources(ctx context.Context, template *v1beta2.ModuleTemplate) ([]v1beta2.ContentResource, error)
	// Descriptor is the descriptor the links come from: the embedded
	// one, or the one stored in the configured registry.
	Descriptor(ctx context.Context, template *v1beta2.ModuleTemplate) (*ocm.Descriptor, error)
}

// Templates resolves what a ModuleTemplate installs into links pinned by
// digest, as a Manifest carries them: for the Kyma controller, which pins
// a version's content once per template change, and for the rollout
// planner, which pins it once per rollout so that every wave gets the same
// bytes.
type Templates struct {
	Pinner LinkPinner
	// Descriptors, when set, derives the links of templates without
	// spec.resources, from their OCM component descriptor (embedded, or in
	// the registry --oci-registry-host names); without it they have none.
	Descriptors Descriptors
}

// FromDescriptor tells whether the template's links come from an OCM
// component descriptor rather than its spec.resources: every template
// without spec.resources, whether it embeds its descriptor or the
// descriptor is in the registry --oci-registry-host names (a template with
// neither is refused there, with a message that says what to set).
func (t Templates) FromDescriptor(template *v1beta2.ModuleTemplate) bool {
	return len(template.Spec.Resources) == 0 && t.Descriptors != nil
}

// Descriptor is the OCM component descriptor a template's module is
// described by, for what it tells besides the links (the component's name,
// its images: the Kyma API's localized images): the embedded one, or, for a
// template whose links come from the registry --oci-registry-host names,
// the one stored there, read as Pin reads it. ok is false when the
// template has neither. A registry that cannot be read now is an error to
// retry; what only a new template or component version can fix wraps
// ocm.ErrInvalid.
func (t Templates) Descriptor(ctx context.Context, template *v1beta2.ModuleTemplate) (d *ocm.Descriptor, ok bool, err error) {
	switch {
	case ocm.HasDescriptor(template):
		d, err = ocm.Parse(template.Spec.Descriptor.Raw)
	case t.FromDescriptor(template):
		d, err = t.Descriptors.Descriptor(ctx, template)
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("ModuleTemplate %s: %w", template.Name, err)
	}
	return d, true, nil
}

// Pin returns the template's links pinned by digest: an oci:// tag resolves
// to its layer's digest, an http(s) URL gets the digest of its body, and a
// descriptor's links are pinned already, to the component version's layers.
func (t Templates) Pin(ctx context.Context, template *v1beta2.ModuleTemplate) ([]v1beta2.ContentResource, error) {
	links := template.Spec.Resources
	if t.FromDescriptor(template) {
		derived, err := t.Descriptors.Resources(ctx, template)
		if err != nil {
			return nil, fmt.Errorf("ModuleTemplate %s: %w", template.Name, err)
		}
		links = derived
	}
	resources := make([]v1beta2.ContentResource, 0, len(links))
	for _, res := range links {
		pinned, err := t.Pinner.Pin(ctx, res)
		if err != nil {
			return nil, fmt.Errorf("pinning %s of ModuleTemplate %s: %w", res.Name, template.Name, err)
		}
		resources = append(resources, pinned)
	}
	return resources, nil
}

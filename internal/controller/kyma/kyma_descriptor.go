package kyma

import (
	"context"
	"sync"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// What a ModuleTemplate's OCM component descriptor tells besides its
// content (internal/ocm): the module's component, which the Kyma's status
// reports (status.modules[].ocmComponentName) when its ModuleReleaseMeta
// names none, and its images, which the Manifest carries as the Kyma API's
// spec.localizedImages. A descriptor is parsed once per template revision,
// not at every reconcile of every Kyma that has the module. A template
// without an embedded descriptor (KLM's, resolved through
// --oci-registry-host) has its descriptor read by the content pipeline's
// resolver (descriptorReader), once per revision too.

// descriptorReader reads a template's descriptor wherever it is: embedded,
// or in the registry the operator's --oci-registry-host names
// (ocm.Resolver).
type descriptorReader interface {
	Descriptor(ctx context.Context, template *v1beta2.ModuleTemplate) (*ocm.Descriptor, error)
}

// descriptorFacts is what a descriptor tells.
type descriptorFacts struct {
	component string
	images    []string
}

// descriptorMemo remembers each template's facts for its resourceVersion.
type descriptorMemo struct {
	mu    sync.Mutex
	byUID map[string]memoEntry
}

type memoEntry struct {
	resourceVersion string
	facts           descriptorFacts
}

// of returns the facts of template's descriptor: none when it has none,
// or an embedded one that does not parse (the content derivation reports
// that). One that reader must read from a registry is read once per
// revision; a failure is returned, and not remembered, so that the next
// reconcile reads it again.
func (d *descriptorMemo) of(ctx context.Context, reader any, template *v1beta2.ModuleTemplate) (descriptorFacts, error) {
	if template == nil {
		return descriptorFacts{}, nil
	}
	embedded := ocm.HasDescriptor(template)
	registry, readable := reader.(descriptorReader)
	if !embedded && !readable {
		return descriptorFacts{}, nil
	}
	uid := string(template.UID)
	d.mu.Lock()
	entry, ok := d.byUID[uid]
	d.mu.Unlock()
	if ok && entry.resourceVersion == template.ResourceVersion {
		return entry.facts, nil
	}
	var facts descriptorFacts
	if embedded {
		if parsed, err := ocm.Parse(template.Spec.Descriptor.Raw); err == nil {
			facts = descriptorFacts{component: parsed.Component.Name, images: parsed.Images()}
		}
	} else if len(template.Spec.Resources) == 0 {
		parsed, err := registry.Descriptor(ctx, template)
		if err != nil {
			return descriptorFacts{}, err
		}
		facts = descriptorFacts{component: parsed.Component.Name, images: parsed.Images()}
	}
	d.mu.Lock()
	if d.byUID == nil {
		d.byUID = map[string]memoEntry{}
	}
	d.byUID[uid] = memoEntry{resourceVersion: template.ResourceVersion, facts: facts}
	d.mu.Unlock()
	return facts, nil
}

// describeModules gives each module without an OCM component from its
// ModuleReleaseMeta the one its template's descriptor names.
// A descriptor that cannot be read now leaves the name empty; the
// module's Manifest reports the failure.
func (d *descriptorMemo) describeModules(ctx context.Context, reader any, modules []resolve.Module) {
	for i := range modules {
		if modules[i].OCMComponentName == "" {
			if facts, err := d.of(ctx, reader, modules[i].Template); err == nil {
				modules[i].OCMComponentName = facts.component
			}
		}
	}
}

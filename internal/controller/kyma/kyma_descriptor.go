package kyma

import (
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
// not at every reconcile of every Kyma that has the module.

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

// of returns the facts of template's descriptor; none when it has none, or
// one that does not parse (the content derivation reports that).
func (d *descriptorMemo) of(template *v1beta2.ModuleTemplate) descriptorFacts {
	if template == nil || !ocm.HasDescriptor(template) {
		return descriptorFacts{}
	}
	uid := string(template.UID)
	d.mu.Lock()
	entry, ok := d.byUID[uid]
	d.mu.Unlock()
	if ok && entry.resourceVersion == template.ResourceVersion {
		return entry.facts
	}
	var facts descriptorFacts
	if parsed, err := ocm.Parse(template.Spec.Descriptor.Raw); err == nil {
		facts = descriptorFacts{component: parsed.Component.Name, images: parsed.Images()}
	}
	d.mu.Lock()
	if d.byUID == nil {
		d.byUID = map[string]memoEntry{}
	}
	d.byUID[uid] = memoEntry{resourceVersion: template.ResourceVersion, facts: facts}
	d.mu.Unlock()
	return facts
}

// describeModules gives each module without an OCM component from its
// ModuleReleaseMeta the one its template's descriptor names.
func (d *descriptorMemo) describeModules(modules []resolve.Module) {
	for i := range modules {
		if modules[i].OCMComponentName == "" {
			modules[i].OCMComponentName = d.of(modules[i].Template).component
		}
	}
}

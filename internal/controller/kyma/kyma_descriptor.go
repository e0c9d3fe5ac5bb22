package kyma

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// What a ModuleTemplate's OCM component descriptor tells besides its
// content (internal/ocm): the module's component, which the Kyma's status
// reports (status.modules[].ocmComponentName) when its ModuleReleaseMeta
// names none, and its images, which the Manifest carries as the Kyma API's
// spec.localizedImages. The content pipeline finds the descriptor
// (content.Templates.Descriptor): embedded, or, for a template without one
// (KLM's, resolved through --oci-registry-host), in that registry. It is
// read once per template revision, not at every reconcile of every Kyma
// that has the module; reconciles that ask at the same time share one read.

// descriptorFacts is what a descriptor tells.
type descriptorFacts struct {
	component string
	images    []string
}

// descriptorMemo remembers each template's facts for its resourceVersion.
type descriptorMemo struct {
	mu    sync.Mutex
	byUID map[string]memoEntry
	reads singleflight.Group
}

type memoEntry struct {
	resourceVersion string
	facts           descriptorFacts
}

// of returns the facts of template's descriptor: none when it has none,
// or an embedded one that does not parse (the content derivation reports
// that). A descriptor that must be read from a registry and cannot be read
// now is an error, not remembered: the next reconcile reads it again, and
// its images are never taken to be none.
func (d *descriptorMemo) of(ctx context.Context, templates content.Templates, template *v1beta2.ModuleTemplate) (descriptorFacts, error) {
	if template == nil {
		return descriptorFacts{}, nil
	}
	if facts, ok := d.remembered(template); ok {
		return facts, nil
	}
	read, err, _ := d.reads.Do(string(template.UID)+"/"+template.ResourceVersion, func() (any, error) {
		// A read that ended since this caller looked is not done again.
		if facts, ok := d.remembered(template); ok {
			return facts, nil
		}
		return d.read(ctx, templates, template)
	})
	if err != nil {
		return descriptorFacts{}, err
	}
	return read.(descriptorFacts), nil
}

// remembered returns the facts read for the template's revision, if any.
func (d *descriptorMemo) remembered(template *v1beta2.ModuleTemplate) (descriptorFacts, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	entry, ok := d.byUID[string(template.UID)]
	if !ok || entry.resourceVersion != template.ResourceVersion {
		return descriptorFacts{}, false
	}
	return entry.facts, true
}

// read asks the content pipeline for the template's descriptor and
// remembers what it tells.
func (d *descriptorMemo) read(ctx context.Context, templates content.Templates, template *v1beta2.ModuleTemplate) (descriptorFacts, error) {
	var facts descriptorFacts
	parsed, found, err := templates.Descriptor(ctx, template)
	switch {
	case err != nil && !ocm.HasDescriptor(template):
		return descriptorFacts{}, err
	case err == nil && found:
		facts = descriptorFacts{component: parsed.Component.Name, images: parsed.Images()}
	}
	d.mu.Lock()
	if d.byUID == nil {
		d.byUID = map[string]memoEntry{}
	}
	d.byUID[string(template.UID)] = memoEntry{resourceVersion: template.ResourceVersion, facts: facts}
	d.mu.Unlock()
	return facts, nil
}

// describeModules gives each module without an OCM component from its
// ModuleReleaseMeta the one its template's descriptor names.
// A descriptor that cannot be read now leaves the name empty; the
// module's Manifest reports the failure.
func (d *descriptorMemo) describeModules(ctx context.Context, templates content.Templates, modules []resolve.Module) {
	for i := range modules {
		if modules[i].OCMComponentName == "" {
			if facts, err := d.of(ctx, templates, modules[i].Template); err == nil {
				modules[i].OCMComponentName = facts.component
			}
		}
	}
}

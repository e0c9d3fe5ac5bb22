package resolve

import (
	"cmp"
	"slices"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Catalog is the read side of the module catalog that resolution needs. It is
// a plain index with no rules of its own, so that the Kyma controller can back
// it with cache indexes and tests with lists (NewCatalog), and both resolve
// the same way because every rule lives in Resolve.
//
// Returned objects are shared with the catalog (and, in the controller, with
// the informer cache): callers must not modify them.
type Catalog interface {
	// ReleaseMeta returns the ModuleReleaseMeta whose spec.moduleName is
	// moduleName.
	ReleaseMeta(moduleName string) (*v1beta2.ModuleReleaseMeta, bool)

	// Template returns the ModuleTemplate of module moduleName (see
	// ModuleName) whose spec.version is exactly version.
	Template(moduleName, version string) (*v1beta2.ModuleTemplate, bool)

	// MandatoryReleaseMetas lists the ModuleReleaseMetas that set
	// spec.mandatory, in any order.
	MandatoryReleaseMetas() []*v1beta2.ModuleReleaseMeta

	// MandatoryTemplates lists the ModuleTemplates with spec.mandatory=true,
	// in any order. Resolve uses only those whose module has no
	// ModuleReleaseMeta (the legacy way of publishing mandatory modules), and
	// picks the highest version among them; that needs every version, which
	// Template cannot enumerate.
	MandatoryTemplates() []*v1beta2.ModuleTemplate
}

// ModuleName is the module a ModuleTemplate belongs to: spec.moduleName, or,
// for templates published before that field existed, the
// operator.kyma-project.io/module-name label. Every Catalog must index
// templates by it so that both kinds of template resolve.
func ModuleName(template *v1beta2.ModuleTemplate) string {
	if template.Spec.ModuleName != "" {
		return template.Spec.ModuleName
	}
	return template.Labels[v1beta2.ModuleNameLabel]
}

// NewCatalog indexes lists of ModuleTemplates and ModuleReleaseMetas, for
// callers that hold lists rather than a cache (tests, lmctl). Objects without
// a module name, and templates without a version, are not indexed. Where two
// objects claim the same module (or module and version), the first by
// namespace/name wins, so that the answer does not depend on list order.
func NewCatalog(templates []v1beta2.ModuleTemplate, metas []v1beta2.ModuleReleaseMeta) Catalog {
	c := &listCatalog{
		metas:     map[string]*v1beta2.ModuleReleaseMeta{},
		templates: map[templateKey]*v1beta2.ModuleTemplate{},
	}

	sortedMetas := slices.Clone(metas)
	slices.SortFunc(sortedMetas, func(a, b v1beta2.ModuleReleaseMeta) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for i := range sortedMetas {
		meta := &sortedMetas[i]
		name := meta.Spec.ModuleName
		if name == "" {
			continue
		}
		if _, taken := c.metas[name]; taken {
			continue
		}
		c.metas[name] = meta
		if meta.Spec.Mandatory != nil {
			c.mandatoryMetas = append(c.mandatoryMetas, meta)
		}
	}

	sortedTemplates := slices.Clone(templates)
	slices.SortFunc(sortedTemplates, func(a, b v1beta2.ModuleTemplate) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for i := range sortedTemplates {
		template := &sortedTemplates[i]
		name := ModuleName(template)
		if name == "" {
			continue
		}
		if template.Spec.Mandatory {
			// Listed even without a usable version: Resolve then reports
			// that the mandatory module has none, instead of dropping it.
			c.mandatoryTemplates = append(c.mandatoryTemplates, template)
		}
		if template.Spec.Version == "" {
			continue
		}
		key := templateKey{module: name, version: template.Spec.Version}
		if _, taken := c.templates[key]; taken {
			continue
		}
		c.templates[key] = template
	}
	return c
}

type templateKey struct {
	module, version string
}

type listCatalog struct {
	metas              map[string]*v1beta2.ModuleReleaseMeta
	templates          map[templateKey]*v1beta2.ModuleTemplate
	mandatoryMetas     []*v1beta2.ModuleReleaseMeta
	mandatoryTemplates []*v1beta2.ModuleTemplate
}

func (c *listCatalog) ReleaseMeta(moduleName string) (*v1beta2.ModuleReleaseMeta, bool) {
	meta, ok := c.metas[moduleName]
	return meta, ok
}

func (c *listCatalog) Template(moduleName, version string) (*v1beta2.ModuleTemplate, bool) {
	template, ok := c.templates[templateKey{module: moduleName, version: version}]
	return template, ok
}

func (c *listCatalog) MandatoryReleaseMetas() []*v1beta2.ModuleReleaseMeta {
	return slices.Clone(c.mandatoryMetas)
}

func (c *listCatalog) MandatoryTemplates() []*v1beta2.ModuleTemplate {
	return slices.Clone(c.mandatoryTemplates)
}

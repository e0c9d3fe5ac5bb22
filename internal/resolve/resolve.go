// Package resolve decides, for every module of a Kyma, the one ModuleTemplate
// to install (SPEC R1): channel to version through the module's
// ModuleReleaseMeta, mandatory modules for every runtime, beta and internal
// visibility, and no downgrades.
//
// It is pure logic: lookups go through a Catalog, so the same rules run on the
// controller's cache and on lists in tests, and nothing here reads or writes
// the cluster.
package resolve

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Module is the outcome of resolving one module of a Kyma.
//
// The contract with the caller: install Template only when Installable. When
// Err is set, the caller reports the module as Error with Err's message and
// leaves the runtime as it is — it neither installs anything for the module
// nor removes what is installed, because a catalog that cannot be resolved is
// never a reason to uninstall. Version and Template are still filled when the
// catalog named them (ErrNotVisible, ErrDowngrade; Version alone for
// ErrTemplateNotFound and ErrInvalidVersion), so that status can show what the
// catalog points to; Template nil means no target is known.
type Module struct {
	// Name is the module name.
	Name string

	// Channel is the channel the module resolved through: its own, else the
	// Kyma's, else v1beta2.DefaultChannel. Empty for mandatory modules,
	// which do not use channels.
	Channel string

	// Version is the version the catalog points to; empty if unknown.
	Version string

	// Template is the ModuleTemplate of Version, shared with the Catalog (do
	// not modify it); nil if unknown.
	Template *v1beta2.ModuleTemplate

	// Spec is the Kyma's entry for the module, with CustomResourcePolicy
	// defaulted to CreateAndDelete when empty. A mandatory module that the
	// Kyma does not list gets CreateAndDelete and Managed true. A module with
	// Managed false is still resolved; what to do with it is the caller's
	// choice.
	Spec v1beta2.Module

	// Mandatory is true for a module that every runtime gets, whether or not
	// the Kyma lists it.
	Mandatory bool

	// OCMComponentName is the module's OCM component as its
	// ModuleReleaseMeta names it (spec.ocmComponentName); empty when it
	// names none.
	OCMComponentName string

	// Err says why the module cannot be installed as resolved. It wraps one
	// of the sentinel errors of this package (ErrNoReleaseMeta, …).
	Err error

	// Held, set by the Kyma controller, says why the installed version
	// stays although the channel points to Version (a rollout's wave not
	// reached yet, a maintenance window); Version is then the installed one.
	Held string
	// HeldUntil, when not zero, is when the hold ends by itself (the
	// runtime's point in its maintenance window); Maintenance says the
	// hold is a maintenance window's.
	HeldUntil   time.Time
	Maintenance bool
	// ManualUpgrade, set by the Kyma controller, is the newer version
	// offered to a module that upgrades manually, its deadline and whether
	// it was approved or forced; nil when none is offered.
	ManualUpgrade *v1beta2.ManualUpgradeStatus

	// Pinned, set by the Kyma controller, are Template's content links as
	// a rollout pinned them at its start (ModuleRollout status.content),
	// to be installed instead of pinning the links again.
	Pinned []v1beta2.ContentResource
}

// Installable reports whether the caller should make Template the installed
// version of the module.
func (m Module) Installable() bool {
	return m.Err == nil && m.Template != nil
}

// Resolve resolves every module the Kyma lists, then every mandatory module
// it does not list. The result is in the Kyma's order followed by mandatory
// modules sorted by name, so that repeated reconciles produce the same
// Manifests and status in the same order. Each module appears once; a
// mandatory module the Kyma lists keeps its place and its entry, but resolves
// through its mandatory version.
//
// installed maps module name to the version currently installed (from the
// Kyma status); a resolved version lower than the installed one is refused
// with ErrDowngrade. An installed version that is not a semantic version
// cannot be compared and does not block.
//
// A mandatory module the Kyma is not labelled to see (beta or internal) is
// left out when the Kyma neither lists it nor has it installed; otherwise it
// is returned with ErrNotVisible, so that nothing installed is removed.
//
// kyma and catalog must not be nil; installed may be.
func Resolve(kyma *v1beta2.Kyma, catalog Catalog, installed map[string]string) []Module {
	r := resolver{
		kyma:      kyma,
		catalog:   catalog,
		installed: installed,
	}
	mandatory := r.mandatorySources()

	modules := make([]Module, 0, len(kyma.Spec.Modules)+len(mandatory))
	listed := make(map[string]bool, len(kyma.Spec.Modules))
	for _, entry := range kyma.Spec.Modules {
		if listed[entry.Name] {
			continue // the API forbids duplicates; tolerate them in objects built in code
		}
		listed[entry.Name] = true
		spec := *entry.DeepCopy()
		if spec.CustomResourcePolicy == "" {
			spec.CustomResourcePolicy = v1beta2.CustomResourcePolicyCreateAndDelete
		}
		if source, ok := mandatory[entry.Name]; ok {
			modules = append(modules, r.resolveMandatory(spec, source))
			continue
		}
		modules = append(modules, r.resolveChannel(spec))
	}

	for _, name := range slices.Sorted(maps.Keys(mandatory)) {
		if listed[name] {
			continue
		}
		module := r.resolveMandatory(v1beta2.Module{
			Name:                 name,
			CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
			Managed:              true,
		}, mandatory[name])
		if _, isInstalled := installed[name]; errors.Is(module.Err, ErrNotVisible) && !isInstalled {
			continue
		}
		modules = append(modules, module)
	}
	return modules
}

type resolver struct {
	kyma      *v1beta2.Kyma
	catalog   Catalog
	installed map[string]string
}

// mandatorySource is where a mandatory module's version comes from: a
// ModuleReleaseMeta's spec.mandatory, or the highest of the legacy mandatory
// ModuleTemplates of a module without a ModuleReleaseMeta (err when none of
// them has a usable version).
type mandatorySource struct {
	meta     *v1beta2.ModuleReleaseMeta
	template *v1beta2.ModuleTemplate
	err      error
}

func (r resolver) mandatorySources() map[string]mandatorySource {
	sources := map[string]mandatorySource{}
	for _, meta := range r.catalog.MandatoryReleaseMetas() {
		// Ask for the module's ModuleReleaseMeta again so that a module
		// resolves through the same object whether it is listed or not.
		name := meta.Spec.ModuleName
		if canonical, ok := r.catalog.ReleaseMeta(name); ok && canonical.Spec.Mandatory != nil {
			sources[name] = mandatorySource{meta: canonical}
		}
	}

	legacy := map[string][]*v1beta2.ModuleTemplate{}
	for _, template := range r.catalog.MandatoryTemplates() {
		name := ModuleName(template)
		if name == "" || !template.Spec.Mandatory {
			continue
		}
		if _, hasMeta := r.catalog.ReleaseMeta(name); hasMeta {
			continue // a ModuleReleaseMeta, mandatory or not, governs its module
		}
		legacy[name] = append(legacy[name], template)
	}
	for name, templates := range legacy {
		sources[name] = highestMandatory(name, templates)
	}
	return sources
}

// highestMandatory picks the legacy mandatory template with the highest
// semantic version; among equal versions the first by namespace/name, so the
// choice does not depend on cache order.
func highestMandatory(name string, templates []*v1beta2.ModuleTemplate) mandatorySource {
	var best *v1beta2.ModuleTemplate
	var bestVersion *semver.Version
	var names []string
	for _, template := range templates {
		names = append(names, template.Name)
		version, err := semver.StrictNewVersion(template.Spec.Version)
		if err != nil {
			continue
		}
		if best == nil || version.GreaterThan(bestVersion) ||
			version.Equal(bestVersion) && objectOrder(template, best) < 0 {
			best, bestVersion = template, version
		}
	}
	if best == nil {
		slices.Sort(names)
		return mandatorySource{err: newError(ErrInvalidVersion,
			"mandatory module %q: none of its ModuleTemplates (%s) has a semantic spec.version; "+
				"set spec.version on them or publish a ModuleReleaseMeta with spec.mandatory.version",
			name, strings.Join(names, ", "))}
	}
	return mandatorySource{template: best}
}

func (r resolver) resolveMandatory(spec v1beta2.Module, source mandatorySource) Module {
	module := Module{Name: spec.Name, Spec: spec, Mandatory: true}
	if source.err != nil {
		module.Err = source.err
		return module
	}
	if source.meta == nil {
		module.Version = source.template.Spec.Version
		module.Template = source.template
		module.Err = r.check(module, nil, fmt.Sprintf("its mandatory version is %s", module.Version))
		return module
	}

	meta := source.meta
	module.OCMComponentName = meta.Spec.OcmComponentName
	module.Version = meta.Spec.Mandatory.Version
	if !isSemver(module.Version) {
		module.Err = newError(ErrInvalidVersion,
			"mandatory module %q: ModuleReleaseMeta %q sets spec.mandatory.version %q, which is not a semantic version "+
				"(MAJOR.MINOR.PATCH); fix the ModuleReleaseMeta",
			module.Name, meta.Name, module.Version)
		return module
	}
	template, ok := r.catalog.Template(module.Name, module.Version)
	if !ok {
		module.Err = newError(ErrTemplateNotFound,
			"mandatory module %q: ModuleReleaseMeta %q sets version %s, but no ModuleTemplate with spec.moduleName %q "+
				"and spec.version %s exists; publish it or set spec.mandatory.version to a published version",
			module.Name, meta.Name, module.Version, module.Name, module.Version)
		return module
	}
	module.Template = template
	module.Err = r.check(module, meta, fmt.Sprintf("its mandatory version is %s", module.Version))
	return module
}

func (r resolver) resolveChannel(spec v1beta2.Module) Module {
	module := Module{
		Name:    spec.Name,
		Channel: cmp.Or(spec.Channel, r.kyma.Spec.Channel, v1beta2.DefaultChannel),
		Spec:    spec,
	}
	meta, ok := r.catalog.ReleaseMeta(module.Name)
	if !ok {
		module.Err = newError(ErrNoReleaseMeta,
			"module %q: no ModuleReleaseMeta with spec.moduleName %q exists, so channel %q cannot be mapped to a version; "+
				"check the module name in the Kyma or publish the module's ModuleReleaseMeta",
			module.Name, module.Name, module.Channel)
		return module
	}

	module.OCMComponentName = meta.Spec.OcmComponentName
	var channels []string
	for _, assignment := range meta.Spec.Channels {
		channels = append(channels, assignment.Channel)
		if assignment.Channel == module.Channel && module.Version == "" {
			module.Version = assignment.Version
		}
	}
	if module.Version == "" {
		known := "none"
		if len(channels) > 0 {
			slices.Sort(channels)
			known = strings.Join(channels, ", ")
		}
		module.Err = newError(ErrChannelNotFound,
			"module %q: ModuleReleaseMeta %q has no channel %q (channels: %s); "+
				"set the module's channel in the Kyma to one of them or add %q to the ModuleReleaseMeta",
			module.Name, meta.Name, module.Channel, known, module.Channel)
		return module
	}
	if !isSemver(module.Version) {
		module.Err = newError(ErrInvalidVersion,
			"module %q: ModuleReleaseMeta %q maps channel %q to %q, which is not a semantic version (MAJOR.MINOR.PATCH); "+
				"fix the ModuleReleaseMeta",
			module.Name, meta.Name, module.Channel, module.Version)
		return module
	}

	template, ok := r.catalog.Template(module.Name, module.Version)
	if !ok {
		module.Err = newError(ErrTemplateNotFound,
			"module %q: channel %q points to version %s, but no ModuleTemplate with spec.moduleName %q "+
				"and spec.version %s exists; publish it or point the channel at a published version",
			module.Name, module.Channel, module.Version, module.Name, module.Version)
		return module
	}
	module.Template = template
	module.Err = r.check(module, meta, fmt.Sprintf("channel %q points to %s", module.Channel, module.Version))
	return module
}

// check applies the rules that need the chosen template: visibility first (a
// Kyma must not even learn it could upgrade to a version it may not see), then
// no downgrade. origin says where the version came from, for the message.
func (r resolver) check(module Module, meta *v1beta2.ModuleReleaseMeta, origin string) error {
	if unmet := RestrictionOf(module.Template.Labels, meta).Unmet(r.kyma.Labels); unmet != (Restriction{}) {
		kinds, missing := unmet.describe()
		return newError(ErrNotVisible, "module %q version %s is %s; the Kyma is not labelled %s",
			module.Name, module.Version, kinds, missing)
	}

	current, err := semver.StrictNewVersion(r.installed[module.Name])
	if err != nil {
		return nil // nothing installed, or nothing comparable (see Resolve)
	}
	target, err := semver.StrictNewVersion(module.Version)
	if err != nil {
		return nil // unreachable: versions are validated before templates are looked up
	}
	if target.LessThan(current) {
		installed := r.installed[module.Name]
		return newError(ErrDowngrade,
			"module %q: %s, lower than the installed %s; downgrades are not allowed, so %s stays installed",
			module.Name, origin, installed, installed)
	}
	return nil
}

func objectOrder(a, b *v1beta2.ModuleTemplate) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func isSemver(version string) bool {
	_, err := semver.StrictNewVersion(version)
	return err == nil
}

// MayRollBack tells whether a version whose ModuleTemplate lists
// rollbackTo (spec.rollbackTo, semantic-version constraints) may be rolled
// back to version. Constraints that do not parse admit nothing.
func MayRollBack(rollbackTo []string, version string) bool {
	v, err := semver.StrictNewVersion(version)
	if err != nil {
		return false
	}
	for _, c := range rollbackTo {
		if constraint, err := semver.NewConstraint(c); err == nil && constraint.Check(v) {
			return true
		}
	}
	return false
}

// Package catalog lists the module catalog of a control plane as a person
// asks about it: which modules exist, which version each channel points to,
// and which are mandatory, beta or internal. It is the model behind
// `lmctl modules`.
//
// It reads the same objects the operator resolves through (ModuleTemplates
// and ModuleReleaseMetas) but applies no resolution rules: a channel that
// points to a version nobody published is shown as such, because that is
// exactly what a module team needs to see.
package catalog

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// MandatoryChannel is shown in place of a channel for a module's mandatory
// version, which every runtime gets regardless of channel.
const MandatoryChannel = "(mandatory)"

// Catalog is every module published in one control-plane namespace.
type Catalog struct {
	Modules []Module `json:"modules"`
}

// Module is one module: its channels and its published versions.
type Module struct {
	Name string `json:"name"`
	// Mandatory is true when the module goes to every runtime.
	Mandatory bool `json:"mandatory,omitempty"`
	// Beta and Internal are the ModuleReleaseMeta's module-wide flags;
	// single versions may be flagged on their templates (see Versions).
	Beta     bool `json:"beta,omitempty"`
	Internal bool `json:"internal,omitempty"`
	// Channels map each channel to a version; a mandatory module has one
	// entry named MandatoryChannel.
	Channels []Channel `json:"channels"`
	// Versions are the published ModuleTemplates, lowest version first.
	Versions []Version `json:"versions"`
}

// Channel is one channel of a module.
type Channel struct {
	Channel string `json:"channel"`
	Version string `json:"version"`
	// Template is the ModuleTemplate of Version; empty when none is
	// published, which leaves the module in Error for Kymas on this channel.
	Template string `json:"template,omitempty"`
}

// Version is one published version (one ModuleTemplate).
type Version struct {
	Version   string `json:"version"`
	Template  string `json:"template"`
	Mandatory bool   `json:"mandatory,omitempty"`
	Beta      bool   `json:"beta,omitempty"`
	Internal  bool   `json:"internal,omitempty"`
}

// Get lists the catalog objects in namespace and builds the Catalog.
func Get(ctx context.Context, c client.Reader, namespace string) (Catalog, error) {
	var templates v1beta2.ModuleTemplateList
	if err := c.List(ctx, &templates, client.InNamespace(namespace)); err != nil {
		return Catalog{}, fmt.Errorf("listing ModuleTemplates in namespace %s: %w", namespace, err)
	}
	var metas v1beta2.ModuleReleaseMetaList
	if err := c.List(ctx, &metas, client.InNamespace(namespace)); err != nil {
		return Catalog{}, fmt.Errorf("listing ModuleReleaseMetas in namespace %s: %w", namespace, err)
	}
	return Build(templates.Items, metas.Items), nil
}

// Build indexes templates and metas by module. Where several
// ModuleReleaseMetas claim one module the first by name wins, as in the
// operator's catalog.
func Build(templates []v1beta2.ModuleTemplate, metas []v1beta2.ModuleReleaseMeta) Catalog {
	modules := map[string]*Module{}
	get := func(name string) *Module {
		m, ok := modules[name]
		if !ok {
			m = &Module{Name: name, Channels: []Channel{}, Versions: []Version{}}
			modules[name] = m
		}
		return m
	}

	sortedMetas := slices.Clone(metas)
	slices.SortFunc(sortedMetas, func(a, b v1beta2.ModuleReleaseMeta) int { return cmp.Compare(a.Name, b.Name) })
	metaByModule := map[string]*v1beta2.ModuleReleaseMeta{}
	for i := range sortedMetas {
		meta := &sortedMetas[i]
		if meta.Spec.ModuleName == "" || metaByModule[meta.Spec.ModuleName] != nil {
			continue
		}
		metaByModule[meta.Spec.ModuleName] = meta
	}

	templateOf := map[[2]string]string{}
	for i := range templates {
		t := &templates[i]
		name := resolve.ModuleName(t)
		if name == "" {
			continue
		}
		m := get(name)
		v := Version{
			Version:   t.Spec.Version,
			Template:  t.Name,
			Mandatory: t.Spec.Mandatory,
			Beta:      labelTrue(t.Labels, v1beta2.BetaLabel),
			Internal:  labelTrue(t.Labels, v1beta2.InternalLabel),
		}
		m.Versions = append(m.Versions, v)
		// A module governed by no ModuleReleaseMeta is mandatory the legacy
		// way, by its templates.
		if t.Spec.Mandatory && metaByModule[name] == nil {
			m.Mandatory = true
		}
		key := [2]string{name, t.Spec.Version}
		if _, taken := templateOf[key]; !taken {
			templateOf[key] = t.Name
		}
	}

	for name, meta := range metaByModule {
		m := get(name)
		m.Beta, m.Internal = meta.Spec.Beta, meta.Spec.Internal
		if meta.Spec.Mandatory != nil {
			m.Mandatory = true
			v := meta.Spec.Mandatory.Version
			m.Channels = append(m.Channels, Channel{Channel: MandatoryChannel, Version: v, Template: templateOf[[2]string{name, v}]})
		}
		for _, a := range meta.Spec.Channels {
			m.Channels = append(m.Channels, Channel{Channel: a.Channel, Version: a.Version, Template: templateOf[[2]string{name, a.Version}]})
		}
	}

	c := Catalog{Modules: make([]Module, 0, len(modules))}
	for _, m := range modules {
		slices.SortFunc(m.Channels, func(a, b Channel) int { return cmp.Compare(a.Channel, b.Channel) })
		slices.SortFunc(m.Versions, func(a, b Version) int {
			return cmp.Or(compareVersions(a.Version, b.Version), cmp.Compare(a.Template, b.Template))
		})
		c.Modules = append(c.Modules, *m)
	}
	slices.SortFunc(c.Modules, func(a, b Module) int { return cmp.Compare(a.Name, b.Name) })
	return c
}

// compareVersions orders semantic versions by precedence and anything else
// after them, alphabetically, so that a broken version still shows up.
func compareVersions(a, b string) int {
	va, errA := semver.StrictNewVersion(a)
	vb, errB := semver.StrictNewVersion(b)
	switch {
	case errA == nil && errB == nil:
		return va.Compare(vb)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	default:
		return cmp.Compare(a, b)
	}
}

func labelTrue(labels map[string]string, key string) bool {
	return labels[key] == "true"
}

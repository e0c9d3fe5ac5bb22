package resolve_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/Masterminds/semver/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// fuzzCase is a Kyma, a catalog and the installed versions, built from bytes
// over a small universe of names, channels and versions, so that the fuzzer
// makes modules, channels and versions meet often. The universe holds the
// sample modules and their versions, odd versions, and one version string
// of the fuzzer's own.
type fuzzCase struct {
	kyma      *v1beta2.Kyma
	templates []v1beta2.ModuleTemplate
	metas     []v1beta2.ModuleReleaseMeta
	installed map[string]string
}

var fuzzChannels = []string{"", v1beta2.DefaultChannel, "fast", "experimental"}

func universe(extraVersion string) (names, versions []string, err error) {
	all, err := samplemodules.All()
	if err != nil {
		return nil, nil, err
	}
	for _, v := range all {
		if !slices.Contains(names, v.Module) {
			names = append(names, v.Module)
		}
		if !slices.Contains(versions, v.Version) {
			versions = append(versions, v.Version)
		}
	}
	names = append(names, "other")
	versions = append(versions, "0.9.0", "1.10.0", "2.0.0-rc.1", "v1.0.0", "1.0", "01.0.0", "", extraVersion)
	return names, versions, nil
}

// bytesReader hands out the fuzzer's bytes; past the end it gives zeros.
type bytesReader []byte

func (r *bytesReader) next() byte {
	if len(*r) == 0 {
		return 0
	}
	b := (*r)[0]
	*r = (*r)[1:]
	return b
}

func pick[T any](r *bytesReader, from []T) T { return from[int(r.next())%len(from)] }

func buildCase(data []byte, extraVersion string) (fuzzCase, error) {
	names, versions, err := universe(extraVersion)
	if err != nil {
		return fuzzCase{}, err
	}
	r := bytesReader(data)
	flags := r.next()
	labels := map[string]string{}
	if flags&1 != 0 {
		labels[v1beta2.BetaLabel] = "true"
	}
	if flags&2 != 0 {
		labels[v1beta2.InternalLabel] = "TRUE"
	}
	c := fuzzCase{installed: map[string]string{}}
	c.kyma = &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: "fuzz", Labels: labels},
		Spec:       v1beta2.KymaSpec{Channel: fuzzChannels[int(flags>>2)%len(fuzzChannels)]},
	}
	for range int(r.next()) % 5 {
		c.kyma.Spec.Modules = append(c.kyma.Spec.Modules, v1beta2.Module{Name: pick(&r, names), Channel: pick(&r, fuzzChannels), Managed: r.next()&1 == 0})
	}
	for i := range int(r.next()) % 5 {
		b := r.next()
		meta := v1beta2.ModuleReleaseMeta{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: fmt.Sprintf("meta-%d", i)},
			Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: pick(&r, names), Beta: b&1 != 0, Internal: b&2 != 0},
		}
		if b&4 != 0 {
			meta.Spec.Mandatory = &v1beta2.Mandatory{Version: pick(&r, versions)}
		}
		for range int(b>>3) % 4 {
			meta.Spec.Channels = append(meta.Spec.Channels, v1beta2.ChannelVersionAssignment{Channel: pick(&r, fuzzChannels), Version: pick(&r, versions)})
		}
		c.metas = append(c.metas, meta)
	}
	for i := range int(r.next()) % 9 {
		b := r.next()
		template := v1beta2.ModuleTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: fmt.Sprintf("template-%d", i), Labels: map[string]string{}},
			Spec:       v1beta2.ModuleTemplateSpec{Version: pick(&r, versions), Mandatory: b&1 != 0},
		}
		name := pick(&r, names)
		if b&2 != 0 { // published before spec.moduleName existed
			template.Labels[v1beta2.ModuleNameLabel] = name
		} else {
			template.Spec.ModuleName = name
		}
		if b&4 != 0 {
			template.Labels[v1beta2.BetaLabel] = "true"
		}
		if b&8 != 0 {
			template.Labels[v1beta2.InternalLabel] = "true"
		}
		c.templates = append(c.templates, template)
	}
	for _, name := range names {
		if b := r.next(); b&1 != 0 {
			c.installed[name] = versions[int(b>>1)%len(versions)]
		}
	}
	return c, nil
}

// FuzzResolve resolves fuzzed Kymas against fuzzed catalogs. Whatever the
// input, a module that resolves as installable keeps every rule: its
// template is of its module and version, the version is semantic, reached
// through the module's channel in its ModuleReleaseMeta (or its mandatory
// version, or the highest legacy mandatory template), visible to the Kyma,
// and not lower than the installed one. Every failure wraps exactly one
// sentinel error, and each module appears once.
func FuzzResolve(f *testing.F) {
	// The bytes index into the universe (see buildCase): names chart,
	// evolving, sample, other; channels "", regular, fast, experimental;
	// versions 1.0.0, 2.0.0, 0.9.0, 1.10.0, 2.0.0-rc.1, v1.0.0, 1.0,
	// 01.0.0, "" and the fuzzer's own.
	f.Add([]byte{}, "")
	// sample listed in regular, which its ModuleReleaseMeta maps to 1.0.0.
	f.Add([]byte{0b0100, 1, 2, 1, 0, 1, 0b01000, 2, 1, 0, 1, 0, 0, 2, 0, 0, 0, 0}, "")
	// Two channels: fast to 2.0.0, regular to 1.0.0; both published.
	f.Add([]byte{0b0100, 1, 2, 1, 0, 1, 0b10000, 2, 2, 1, 1, 0, 2, 0, 0, 2, 0, 1, 2, 0, 0, 0, 0}, "")
	// Downgrade: evolving installed at 2.0.0, regular points to 1.0.0.
	f.Add([]byte{0b0100, 1, 1, 1, 0, 1, 0b01000, 1, 1, 0, 1, 0, 0, 1, 0, 3, 0, 0}, "")
	// Upgrade: evolving installed at 1.0.0, regular points to 2.0.0.
	f.Add([]byte{0b0100, 1, 1, 1, 0, 1, 0b01000, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 0}, "")
	// A beta ModuleReleaseMeta and a Kyma without the beta label.
	f.Add([]byte{0b0100, 1, 2, 1, 0, 1, 0b01001, 2, 1, 0, 1, 0, 0, 2, 0, 0, 0, 0}, "")
	// chart mandatory at 1.0.0 through its ModuleReleaseMeta, not listed.
	f.Add([]byte{0b0100, 0, 1, 0b00100, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, "")
	// Legacy mandatory templates of "other" (label-named, one beta and
	// internal, one without a semantic version), installed at 1.0.0.
	f.Add([]byte{0b0111, 0, 0, 3, 0b0011, 0, 3, 0b1101, 3, 3, 0b0001, 6, 3, 0, 0, 0, 1}, "")
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "1.0.0+build.1")
	f.Fuzz(func(t *testing.T, data []byte, extraVersion string) {
		c, err := buildCase(data, extraVersion)
		if err != nil {
			t.Fatal(err)
		}
		catalog := resolve.NewCatalog(c.templates, c.metas)
		modules := resolve.Resolve(c.kyma, catalog, c.installed)
		checkResolution(t, c, catalog, modules)

		// The catalog's order does not matter.
		slices.Reverse(c.templates)
		slices.Reverse(c.metas)
		again := resolve.Resolve(c.kyma, resolve.NewCatalog(c.templates, c.metas), c.installed)
		if len(again) != len(modules) {
			t.Fatalf("%d modules, %d with the catalog reversed", len(modules), len(again))
		}
		for i := range modules {
			if modules[i].Name != again[i].Name || modules[i].Version != again[i].Version ||
				templateName(modules[i]) != templateName(again[i]) || (modules[i].Err == nil) != (again[i].Err == nil) {
				t.Fatalf("module %d differs with the catalog reversed: %+v and %+v", i, modules[i], again[i])
			}
		}
	})
}

var sentinels = []error{
	resolve.ErrNoReleaseMeta, resolve.ErrChannelNotFound, resolve.ErrInvalidVersion,
	resolve.ErrTemplateNotFound, resolve.ErrNotVisible, resolve.ErrDowngrade,
}

func checkResolution(t *testing.T, c fuzzCase, catalog resolve.Catalog, modules []resolve.Module) {
	t.Helper()
	beta := c.kyma.Labels[v1beta2.BetaLabel] != ""
	internal := c.kyma.Labels[v1beta2.InternalLabel] != ""
	seen := map[string]bool{}
	for _, m := range modules {
		if seen[m.Name] {
			t.Fatalf("module %q resolved twice", m.Name)
		}
		seen[m.Name] = true
		if m.Template != nil && m.Template.Spec.Version != m.Version {
			t.Fatalf("module %q: version %q, but template %s has %q", m.Name, m.Version, m.Template.Name, m.Template.Spec.Version)
		}
		if m.Err != nil {
			n := 0
			for _, s := range sentinels {
				if errors.Is(m.Err, s) {
					n++
				}
			}
			if n != 1 || m.Err.Error() == "" {
				t.Fatalf("module %q: error %q wraps %d sentinels", m.Name, m.Err, n)
			}
			continue
		}
		if !m.Installable() {
			t.Fatalf("module %q: no error and no template", m.Name)
		}
		if resolve.ModuleName(m.Template) != m.Name {
			t.Fatalf("module %q resolved to template %s of module %q", m.Name, m.Template.Name, resolve.ModuleName(m.Template))
		}
		version, err := semver.StrictNewVersion(m.Version)
		if err != nil {
			t.Fatalf("module %q resolved to %q, not a semantic version", m.Name, m.Version)
		}
		meta, hasMeta := catalog.ReleaseMeta(m.Name)
		if (m.Template.Labels[v1beta2.BetaLabel] == "true" || hasMeta && meta.Spec.Beta) && !beta {
			t.Fatalf("module %q: beta version %s resolved for a Kyma without the beta label", m.Name, m.Version)
		}
		if (m.Template.Labels[v1beta2.InternalLabel] == "true" || hasMeta && meta.Spec.Internal) && !internal {
			t.Fatalf("module %q: internal version %s resolved for a Kyma without the internal label", m.Name, m.Version)
		}
		if installed, err := semver.StrictNewVersion(c.installed[m.Name]); err == nil && version.LessThan(installed) {
			t.Fatalf("module %q: downgrade from %s to %s", m.Name, installed, version)
		}
		switch {
		case !m.Mandatory:
			checkChannel(t, c, m, meta, hasMeta)
		case hasMeta:
			if meta.Spec.Mandatory == nil || meta.Spec.Mandatory.Version != m.Version {
				t.Fatalf("mandatory module %q resolved to %s, not its ModuleReleaseMeta's mandatory version", m.Name, m.Version)
			}
		default:
			checkHighestLegacy(t, catalog, m, version)
		}
	}
	for _, entry := range c.kyma.Spec.Modules {
		if !seen[entry.Name] {
			t.Fatalf("listed module %q is missing from the result", entry.Name)
		}
	}
}

// checkChannel: a module resolved through a channel got a version its
// ModuleReleaseMeta assigns to the channel it resolves through.
func checkChannel(t *testing.T, c fuzzCase, m resolve.Module, meta *v1beta2.ModuleReleaseMeta, hasMeta bool) {
	t.Helper()
	if !hasMeta {
		t.Fatalf("module %q resolved through a channel without a ModuleReleaseMeta", m.Name)
	}
	i := slices.IndexFunc(c.kyma.Spec.Modules, func(e v1beta2.Module) bool { return e.Name == m.Name })
	if i < 0 {
		t.Fatalf("module %q resolved through a channel but the Kyma does not list it", m.Name)
	}
	channel := cmp.Or(c.kyma.Spec.Modules[i].Channel, c.kyma.Spec.Channel, v1beta2.DefaultChannel)
	if m.Channel != channel {
		t.Fatalf("module %q resolved through channel %q, want %q", m.Name, m.Channel, channel)
	}
	// Admission makes channels unique; in objects built in code a channel
	// may repeat (with an empty version first: testdata/fuzz), and any of
	// its assignments is then a version the channel points to.
	if !slices.ContainsFunc(meta.Spec.Channels, func(a v1beta2.ChannelVersionAssignment) bool {
		return a.Channel == channel && a.Version == m.Version
	}) {
		t.Fatalf("module %q resolved to %s, which channel %q of %s does not point to", m.Name, m.Version, channel, meta.Name)
	}
}

// checkHighestLegacy: a mandatory module without ModuleReleaseMeta got the
// highest semantic version among its mandatory templates.
func checkHighestLegacy(t *testing.T, catalog resolve.Catalog, m resolve.Module, version *semver.Version) {
	t.Helper()
	if !m.Template.Spec.Mandatory {
		t.Fatalf("mandatory module %q resolved to template %s, which is not mandatory", m.Name, m.Template.Name)
	}
	for _, other := range catalog.MandatoryTemplates() {
		if resolve.ModuleName(other) != m.Name {
			continue
		}
		if v, err := semver.StrictNewVersion(other.Spec.Version); err == nil && v.GreaterThan(version) {
			t.Fatalf("mandatory module %q resolved to %s although template %s has %s", m.Name, version, other.Name, v)
		}
	}
}

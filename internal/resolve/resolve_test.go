package resolve_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// want is what one resolved module must look like. template is the name of
// the ModuleTemplate object ("" for none); spec, when set, must equal
// Module.Spec; err is the sentinel Module.Err must wrap (nil for success) and
// msg, when set, Module.Err's whole message.
type want struct {
	name      string
	channel   string
	version   string
	template  string
	mandatory bool
	spec      *v1beta2.Module
	err       error
	msg       string
}

func TestResolve(t *testing.T) {
	// alpha is an ordinary module with three channels.
	alphaMeta := releaseMeta("alpha", "regular=1.0.0", "fast=1.1.0", "experimental=1.2.0")
	alphaTemplates := []v1beta2.ModuleTemplate{
		template("alpha", "1.0.0"), template("alpha", "1.1.0"), template("alpha", "1.2.0"),
	}
	// keda is mandatory through its ModuleReleaseMeta.
	kedaMeta := mandatoryMeta("keda", "2.0.0")
	kedaTemplate := template("keda", "2.0.0")

	tests := []struct {
		name      string
		templates []v1beta2.ModuleTemplate
		metas     []v1beta2.ModuleReleaseMeta
		kyma      *v1beta2.Kyma
		installed map[string]string
		want      []want
	}{
		{
			name:      "module channel overrides the Kyma channel",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("fast", nil, module("alpha", "experimental")),
			want:      []want{{name: "alpha", channel: "experimental", version: "1.2.0", template: "alpha-1.2.0"}},
		},
		{
			name:      "Kyma channel applies when the module names none",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("fast", nil, module("alpha", "")),
			want:      []want{{name: "alpha", channel: "fast", version: "1.1.0", template: "alpha-1.1.0"}},
		},
		{
			name:      "regular is the channel when neither module nor Kyma names one",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "")),
			want:      []want{{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"}},
		},
		{
			name:      "unknown module has no ModuleReleaseMeta",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("ghost", "")),
			want: []want{{
				name: "ghost", channel: "regular", err: resolve.ErrNoReleaseMeta,
				msg: `module "ghost": no ModuleReleaseMeta with spec.moduleName "ghost" exists, so channel "regular" ` +
					`cannot be mapped to a version; check the module name in the Kyma or publish the module's ModuleReleaseMeta`,
			}},
		},
		{
			name:      "unknown channel names the channels that exist",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "nightly")),
			want: []want{{
				name: "alpha", channel: "nightly", err: resolve.ErrChannelNotFound,
				msg: `module "alpha": ModuleReleaseMeta "alpha" has no channel "nightly" (channels: experimental, fast, regular); ` +
					`set the module's channel in the Kyma to one of them or add "nightly" to the ModuleReleaseMeta`,
			}},
		},
		{
			name:      "channel points to a version without a ModuleTemplate",
			templates: alphaTemplates,
			metas:     metas(releaseMeta("alpha", "regular=1.3.0")),
			kyma:      kyma("", nil, module("alpha", "")),
			want: []want{{
				name: "alpha", channel: "regular", version: "1.3.0", err: resolve.ErrTemplateNotFound,
				msg: `module "alpha": channel "regular" points to version 1.3.0, but no ModuleTemplate with spec.moduleName "alpha" ` +
					`and spec.version 1.3.0 exists; publish it or point the channel at a published version`,
			}},
		},
		{
			name:      "channel points to a version that is not semantic",
			templates: append(slices.Clone(alphaTemplates), template("alpha", "1.3")),
			metas:     metas(releaseMeta("alpha", "regular=1.3")),
			kyma:      kyma("", nil, module("alpha", "")),
			want:      []want{{name: "alpha", channel: "regular", version: "1.3", err: resolve.ErrInvalidVersion}},
		},
		{
			name:      "ModuleTemplate found by the module-name label when spec.moduleName is empty",
			templates: []v1beta2.ModuleTemplate{legacyNamed(template("alpha", "1.0.0"))},
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "")),
			want:      []want{{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"}},
		},
		{
			name:      "beta template is not resolved for a Kyma without the beta label",
			templates: []v1beta2.ModuleTemplate{labelled(template("alpha", "1.0.0"), v1beta2.BetaLabel, "true")},
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "")),
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0", err: resolve.ErrNotVisible,
				msg: `module "alpha" version 1.0.0 is beta; the Kyma is not labelled operator.kyma-project.io/beta=true`,
			}},
		},
		{
			name:      "beta template resolves for a beta Kyma, labels compared case-insensitively",
			templates: []v1beta2.ModuleTemplate{labelled(template("alpha", "1.0.0"), v1beta2.BetaLabel, "true")},
			metas:     metas(alphaMeta),
			kyma:      kyma("", map[string]string{v1beta2.BetaLabel: "True"}, module("alpha", "")),
			want:      []want{{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"}},
		},
		{
			name:      "beta ModuleReleaseMeta is not resolved for a Kyma labelled beta=false",
			templates: alphaTemplates,
			metas:     metas(withFlags(alphaMeta, true, false)),
			kyma:      kyma("", map[string]string{v1beta2.BetaLabel: "false"}, module("alpha", "")),
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0", err: resolve.ErrNotVisible,
			}},
		},
		{
			name:      "internal template is not resolved for a Kyma that is only beta, labels compared case-insensitively",
			templates: []v1beta2.ModuleTemplate{labelled(template("alpha", "1.0.0"), v1beta2.InternalLabel, "True")},
			metas:     metas(alphaMeta),
			kyma:      kyma("", map[string]string{v1beta2.BetaLabel: "true"}, module("alpha", "")),
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0", err: resolve.ErrNotVisible,
				msg: `module "alpha" version 1.0.0 is internal; the Kyma is not labelled operator.kyma-project.io/internal=true`,
			}},
		},
		{
			name:      "internal ModuleReleaseMeta is not resolved for a Kyma without the internal label",
			templates: alphaTemplates,
			metas:     metas(withFlags(alphaMeta, false, true)),
			kyma:      kyma("", map[string]string{v1beta2.BetaLabel: "true"}, module("alpha", "")),
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0", err: resolve.ErrNotVisible,
			}},
		},
		{
			name:      "internal ModuleReleaseMeta resolves for an internal Kyma",
			templates: alphaTemplates,
			metas:     metas(withFlags(alphaMeta, false, true)),
			kyma:      kyma("", map[string]string{v1beta2.InternalLabel: "true"}, module("alpha", "")),
			want:      []want{{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"}},
		},
		{
			name: "module both beta and internal names both missing labels",
			templates: []v1beta2.ModuleTemplate{
				labelled(labelled(template("alpha", "1.0.0"), v1beta2.BetaLabel, "true"), v1beta2.InternalLabel, "true"),
			},
			metas: metas(alphaMeta),
			kyma:  kyma("", nil, module("alpha", "")),
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0", err: resolve.ErrNotVisible,
				msg: `module "alpha" version 1.0.0 is beta and internal; the Kyma is not labelled ` +
					`operator.kyma-project.io/beta=true and operator.kyma-project.io/internal=true`,
			}},
		},
		{
			name:      "mandatory module of a ModuleReleaseMeta goes to a Kyma that does not list it",
			templates: append(slices.Clone(alphaTemplates), kedaTemplate),
			metas:     metas(alphaMeta, kedaMeta),
			kyma:      kyma("", nil, module("alpha", "")),
			want: []want{
				{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"},
				{
					name: "keda", version: "2.0.0", template: "keda-2.0.0", mandatory: true,
					spec: &v1beta2.Module{
						Name: "keda", Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
					},
				},
			},
		},
		{
			name:  "mandatory ModuleReleaseMeta without its ModuleTemplate",
			metas: metas(kedaMeta),
			kyma:  kyma("", nil),
			want: []want{{
				name: "keda", version: "2.0.0", mandatory: true, err: resolve.ErrTemplateNotFound,
				msg: `mandatory module "keda": ModuleReleaseMeta "keda" sets version 2.0.0, but no ModuleTemplate with ` +
					`spec.moduleName "keda" and spec.version 2.0.0 exists; publish it or set spec.mandatory.version to a published version`,
			}},
		},
		{
			name: "legacy mandatory ModuleTemplates: the highest semantic version wins",
			templates: []v1beta2.ModuleTemplate{
				mandatory(template("istio", "1.9.0")),
				mandatory(template("istio", "1.10.0")),
				mandatory(template("istio", "1.2.0")),
				mandatory(template("istio", "1.10.0-rc.1")),
				mandatory(template("istio", "")), // unusable, ignored
			},
			kyma: kyma("", nil),
			want: []want{{name: "istio", version: "1.10.0", template: "istio-1.10.0", mandatory: true}},
		},
		{
			name:      "legacy mandatory ModuleTemplates are ignored when the module has a ModuleReleaseMeta",
			templates: append(slices.Clone(alphaTemplates), mandatory(template("alpha", "9.0.0"))),
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil),
			want:      []want{},
		},
		{
			name:      "legacy mandatory ModuleTemplates without a semantic version",
			templates: []v1beta2.ModuleTemplate{mandatory(template("istio", "")), mandatory(template("istio", "1.0"))},
			kyma:      kyma("", nil),
			want: []want{{
				name: "istio", mandatory: true, err: resolve.ErrInvalidVersion,
				msg: `mandatory module "istio": none of its ModuleTemplates (istio-, istio-1.0) has a semantic spec.version; ` +
					`set spec.version on them or publish a ModuleReleaseMeta with spec.mandatory.version`,
			}},
		},
		{
			name:      "mandatory module also listed in the Kyma appears once, in the Kyma's place, with the Kyma's entry",
			templates: append(slices.Clone(alphaTemplates), kedaTemplate),
			metas:     metas(alphaMeta, kedaMeta),
			kyma: kyma("", nil,
				v1beta2.Module{Name: "keda", Channel: "fast", CustomResourcePolicy: v1beta2.CustomResourcePolicyIgnore, Managed: true},
				module("alpha", "")),
			want: []want{
				{
					name: "keda", version: "2.0.0", template: "keda-2.0.0", mandatory: true,
					spec: &v1beta2.Module{
						Name: "keda", Channel: "fast", Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyIgnore,
					},
				},
				{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"},
			},
		},
		{
			name:      "mandatory beta module is left out of a Kyma that may not see it and does not have it",
			templates: []v1beta2.ModuleTemplate{labelled(kedaTemplate, v1beta2.BetaLabel, "true")},
			metas:     metas(kedaMeta),
			kyma:      kyma("", nil),
			want:      []want{},
		},
		{
			name:      "mandatory beta module already installed is kept with an error, not dropped",
			templates: []v1beta2.ModuleTemplate{labelled(kedaTemplate, v1beta2.BetaLabel, "true")},
			metas:     metas(kedaMeta),
			kyma:      kyma("", nil),
			installed: map[string]string{"keda": "1.0.0"},
			want: []want{{
				name: "keda", version: "2.0.0", template: "keda-2.0.0", mandatory: true, err: resolve.ErrNotVisible,
			}},
		},
		{
			name:      "downgrade is refused, the target is still reported",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "")),
			installed: map[string]string{"alpha": "2.0.0"},
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0", err: resolve.ErrDowngrade,
				msg: `module "alpha": channel "regular" points to 1.0.0, lower than the installed 2.0.0; ` +
					`downgrades are not allowed, so 2.0.0 stays installed`,
			}},
		},
		{
			name:      "downgrade of a mandatory module is refused",
			templates: []v1beta2.ModuleTemplate{kedaTemplate},
			metas:     metas(kedaMeta),
			kyma:      kyma("", nil),
			installed: map[string]string{"keda": "3.0.0"},
			want: []want{{
				name: "keda", version: "2.0.0", template: "keda-2.0.0", mandatory: true, err: resolve.ErrDowngrade,
				msg: `module "keda": its mandatory version is 2.0.0, lower than the installed 3.0.0; ` +
					`downgrades are not allowed, so 3.0.0 stays installed`,
			}},
		},
		{
			name:      "pre-release of the installed version counts as a downgrade",
			templates: []v1beta2.ModuleTemplate{template("alpha", "1.0.0-rc.1")},
			metas:     metas(releaseMeta("alpha", "regular=1.0.0-rc.1")),
			kyma:      kyma("", nil, module("alpha", "")),
			installed: map[string]string{"alpha": "1.0.0"},
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0-rc.1", template: "alpha-1.0.0-rc.1", err: resolve.ErrDowngrade,
			}},
		},
		{
			name:      "upgrade is allowed",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "fast")),
			installed: map[string]string{"alpha": "1.0.0"},
			want:      []want{{name: "alpha", channel: "fast", version: "1.1.0", template: "alpha-1.1.0"}},
		},
		{
			name:      "upgrade compares versions semantically, not as text",
			templates: []v1beta2.ModuleTemplate{template("alpha", "1.10.0")},
			metas:     metas(releaseMeta("alpha", "regular=1.10.0")),
			kyma:      kyma("", nil, module("alpha", "")),
			installed: map[string]string{"alpha": "1.9.0"},
			want:      []want{{name: "alpha", channel: "regular", version: "1.10.0", template: "alpha-1.10.0"}},
		},
		{
			name:      "equal version is fine",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "")),
			installed: map[string]string{"alpha": "1.0.0"},
			want:      []want{{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"}},
		},
		{
			name:      "installed version that is not semantic does not block",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "")),
			installed: map[string]string{"alpha": "latest"},
			want:      []want{{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"}},
		},
		{
			name: "one bad module does not affect the others",
			templates: append(slices.Clone(alphaTemplates),
				template("zeta", "0.1.0"), labelled(template("omega", "1.0.0"), v1beta2.BetaLabel, "true")),
			metas: metas(alphaMeta, releaseMeta("zeta", "regular=0.1.0"), releaseMeta("omega", "regular=1.0.0")),
			kyma: kyma("fast", nil,
				module("alpha", ""), module("ghost", ""), module("omega", "regular"), module("zeta", "regular")),
			want: []want{
				{name: "alpha", channel: "fast", version: "1.1.0", template: "alpha-1.1.0"},
				{name: "ghost", channel: "fast", err: resolve.ErrNoReleaseMeta},
				{name: "omega", channel: "regular", version: "1.0.0", template: "omega-1.0.0", err: resolve.ErrNotVisible},
				{name: "zeta", channel: "regular", version: "0.1.0", template: "zeta-0.1.0"},
			},
		},
		{
			name: "order is the Kyma's, then mandatory modules sorted by name",
			templates: append(slices.Clone(alphaTemplates),
				template("zeta", "0.1.0"), kedaTemplate, mandatory(template("auditlog", "1.0.0"))),
			metas: metas(mandatoryMeta("zulu", "1.0.0"), kedaMeta, releaseMeta("zeta", "regular=0.1.0"), alphaMeta),
			kyma:  kyma("", nil, module("zeta", ""), module("alpha", "")),
			want: []want{
				{name: "zeta", channel: "regular", version: "0.1.0", template: "zeta-0.1.0"},
				{name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0"},
				{name: "auditlog", version: "1.0.0", template: "auditlog-1.0.0", mandatory: true},
				{name: "keda", version: "2.0.0", template: "keda-2.0.0", mandatory: true},
				{name: "zulu", version: "1.0.0", mandatory: true, err: resolve.ErrTemplateNotFound},
			},
		},
		{
			name:      "unmanaged module is still resolved and keeps managed false; empty policy gets the default",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, v1beta2.Module{Name: "alpha", Managed: false}),
			want: []want{{
				name: "alpha", channel: "regular", version: "1.0.0", template: "alpha-1.0.0",
				spec: &v1beta2.Module{
					Name: "alpha", Managed: false, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
				},
			}},
		},
		{
			name:      "a module listed twice resolves once, as first listed",
			templates: alphaTemplates,
			metas:     metas(alphaMeta),
			kyma:      kyma("", nil, module("alpha", "fast"), module("alpha", "experimental")),
			want:      []want{{name: "alpha", channel: "fast", version: "1.1.0", template: "alpha-1.1.0"}},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := resolve.Resolve(tt.kyma, resolve.NewCatalog(tt.templates, tt.metas), tt.installed)

			g.Expect(names(got)).To(Equal(wantNames(tt.want)), "modules and their order")
			for i, w := range tt.want {
				m := got[i]
				g.Expect(m.Channel).To(Equal(w.channel), "%s: channel", w.name)
				g.Expect(m.Version).To(Equal(w.version), "%s: version", w.name)
				g.Expect(templateName(m)).To(Equal(w.template), "%s: template", w.name)
				g.Expect(m.Mandatory).To(Equal(w.mandatory), "%s: mandatory", w.name)
				if w.spec != nil {
					g.Expect(m.Spec).To(Equal(*w.spec), "%s: spec", w.name)
				}
				if w.err == nil {
					g.Expect(m.Err).NotTo(HaveOccurred(), "%s: err", w.name)
					g.Expect(m.Installable()).To(BeTrue(), "%s: installable", w.name)
					continue
				}
				g.Expect(m.Err).To(MatchError(w.err), "%s: err kind", w.name)
				g.Expect(m.Installable()).To(BeFalse(), "%s: installable", w.name)
				if w.msg != "" {
					g.Expect(m.Err.Error()).To(Equal(w.msg), "%s: message", w.name)
				}
			}
		})
	}
}

// TestResolveDoesNotDependOnCatalogOrder guards the determinism that keeps
// reconciles from flapping: the controller's cache lists objects in any order.
func TestResolveDoesNotDependOnCatalogOrder(t *testing.T) {
	g := NewWithT(t)
	templates := []v1beta2.ModuleTemplate{
		template("alpha", "1.0.0"),
		mandatory(template("istio", "1.0.0")),
		mandatory(template("istio", "2.0.0")),
		named(mandatory(template("istio", "2.0.0")), "istio-copy"),
		template("keda", "2.0.0"),
		named(template("keda", "2.0.0"), "keda-copy"),
	}
	metas := []v1beta2.ModuleReleaseMeta{
		releaseMeta("alpha", "regular=1.0.0"),
		mandatoryMeta("keda", "2.0.0"),
	}
	k := kyma("", nil, module("alpha", ""))

	first := resolve.Resolve(k, resolve.NewCatalog(templates, metas), nil)
	slices.Reverse(templates)
	slices.Reverse(metas)
	second := resolve.Resolve(k, resolve.NewCatalog(templates, metas), nil)
	third := resolve.Resolve(k, reversedCatalog{resolve.NewCatalog(templates, metas)}, nil)

	g.Expect(names(first)).To(Equal([]string{"alpha", "istio", "keda"}))
	g.Expect(first).To(Equal(second))
	g.Expect(first).To(Equal(third))
	g.Expect(templateName(first[1])).To(Equal("istio-2.0.0"), "equal versions: first by name")
	g.Expect(templateName(first[2])).To(Equal("keda-2.0.0"), "duplicate template: first by name")
}

// TestErrIsSurvivesWrapping checks the promise callers rely on: the sentinel
// is found even after the caller wraps Module.Err with context of its own.
// reversedCatalog lists mandatory objects in the reverse of NewCatalog's
// order, as a cache-backed Catalog may.
type reversedCatalog struct{ resolve.Catalog }

func (c reversedCatalog) MandatoryReleaseMetas() []*v1beta2.ModuleReleaseMeta {
	metas := c.Catalog.MandatoryReleaseMetas()
	slices.Reverse(metas)
	return metas
}

func (c reversedCatalog) MandatoryTemplates() []*v1beta2.ModuleTemplate {
	templates := c.Catalog.MandatoryTemplates()
	slices.Reverse(templates)
	return templates
}

func TestErrIsSurvivesWrapping(t *testing.T) {
	g := NewWithT(t)
	got := resolve.Resolve(kyma("", nil, module("ghost", "")), resolve.NewCatalog(nil, nil), nil)

	g.Expect(got).To(HaveLen(1))
	wrapped := fmt.Errorf("kyma kcp-system/k1: %w", got[0].Err)
	g.Expect(errors.Is(wrapped, resolve.ErrNoReleaseMeta)).To(BeTrue())
	g.Expect(errors.Is(wrapped, resolve.ErrDowngrade)).To(BeFalse())
}

func TestModuleName(t *testing.T) {
	tests := []struct {
		name     string
		template v1beta2.ModuleTemplate
		want     string
	}{
		{name: "spec.moduleName", template: template("alpha", "1.0.0"), want: "alpha"},
		{name: "label when spec.moduleName is empty", template: legacyNamed(template("alpha", "1.0.0")), want: "alpha"},
		{
			name:     "spec.moduleName wins over the label",
			template: labelled(template("alpha", "1.0.0"), v1beta2.ModuleNameLabel, "other"),
			want:     "alpha",
		},
		{name: "neither", template: v1beta2.ModuleTemplate{}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(resolve.ModuleName(&tt.template)).To(Equal(tt.want))
		})
	}
}

func kyma(channel string, labels map[string]string, modules ...v1beta2.Module) *v1beta2.Kyma {
	return &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: "k1", Labels: labels},
		Spec:       v1beta2.KymaSpec{Channel: channel, Modules: modules},
	}
}

// module is a Kyma entry as the API server defaults it.
func module(name, channel string) v1beta2.Module {
	return v1beta2.Module{
		Name: name, Channel: channel, Managed: true,
		CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
	}
}

func template(moduleName, version string) v1beta2.ModuleTemplate {
	return v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: moduleName + "-" + version},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: moduleName, Version: version},
	}
}

func mandatory(t v1beta2.ModuleTemplate) v1beta2.ModuleTemplate {
	t.Spec.Mandatory = true
	return t
}

func named(t v1beta2.ModuleTemplate, name string) v1beta2.ModuleTemplate {
	t.Name = name
	return t
}

func labelled(t v1beta2.ModuleTemplate, key, value string) v1beta2.ModuleTemplate {
	t = *t.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[key] = value
	return t
}

// legacyNamed moves the module name from spec.moduleName to the label, as in
// templates published before spec.moduleName existed.
func legacyNamed(t v1beta2.ModuleTemplate) v1beta2.ModuleTemplate {
	t = labelled(t, v1beta2.ModuleNameLabel, t.Spec.ModuleName)
	t.Spec.ModuleName = ""
	return t
}

// releaseMeta maps channels to versions, each given as "channel=version".
func releaseMeta(moduleName string, assignments ...string) v1beta2.ModuleReleaseMeta {
	meta := v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: moduleName},
		Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: moduleName},
	}
	for _, a := range assignments {
		channel, version, _ := strings.Cut(a, "=")
		meta.Spec.Channels = append(meta.Spec.Channels, v1beta2.ChannelVersionAssignment{Channel: channel, Version: version})
	}
	return meta
}

func mandatoryMeta(moduleName, version string) v1beta2.ModuleReleaseMeta {
	meta := releaseMeta(moduleName)
	meta.Spec.Mandatory = &v1beta2.Mandatory{Version: version}
	return meta
}

func withFlags(meta v1beta2.ModuleReleaseMeta, beta, internal bool) v1beta2.ModuleReleaseMeta {
	meta = *meta.DeepCopy()
	meta.Spec.Beta, meta.Spec.Internal = beta, internal
	return meta
}

func metas(m ...v1beta2.ModuleReleaseMeta) []v1beta2.ModuleReleaseMeta { return m }

func names(modules []resolve.Module) []string {
	out := []string{}
	for _, m := range modules {
		out = append(out, m.Name)
	}
	return out
}

func wantNames(want []want) []string {
	out := []string{}
	for _, w := range want {
		out = append(out, w.name)
	}
	return out
}

func templateName(m resolve.Module) string {
	if m.Template == nil {
		return ""
	}
	return m.Template.Name
}

// TestOCMComponentNameComesFromTheReleaseMeta: a module resolved through a
// channel or as mandatory carries the OCM component its ModuleReleaseMeta
// names, for the Kyma's status as the Kyma API reports it.
func TestOCMComponentNameComesFromTheReleaseMeta(t *testing.T) {
	g := NewWithT(t)
	channel := releaseMeta("alpha", "regular=1.0.0")
	channel.Spec.OcmComponentName = "kyma-project.io/module/alpha"
	required := mandatoryMeta("keda", "2.0.0")
	required.Spec.OcmComponentName = "kyma-project.io/module/keda"
	plain := releaseMeta("beta", "regular=1.0.0")
	catalog := resolve.NewCatalog(
		[]v1beta2.ModuleTemplate{template("alpha", "1.0.0"), template("keda", "2.0.0"), template("beta", "1.0.0")},
		metas(channel, required, plain))

	got := resolve.Resolve(kyma("", nil, module("alpha", ""), module("beta", "")), catalog, nil)
	components := map[string]string{}
	for _, m := range got {
		g.Expect(m.Err).NotTo(HaveOccurred())
		components[m.Name] = m.OCMComponentName
	}
	g.Expect(components).To(Equal(map[string]string{
		"alpha": "kyma-project.io/module/alpha", "keda": "kyma-project.io/module/keda", "beta": "",
	}))
}

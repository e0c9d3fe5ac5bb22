package catalog_test

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/catalog"
)

func template(module, version string, labels ...string) v1beta2.ModuleTemplate {
	t := v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-" + version, Namespace: "kcp-system", Labels: map[string]string{}},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: module, Version: version},
	}
	for _, l := range labels {
		t.Labels[l] = "true"
	}
	return t
}

func meta(module string, channels ...string) v1beta2.ModuleReleaseMeta {
	m := v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Name: module, Namespace: "kcp-system"},
		Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: module},
	}
	for _, c := range channels {
		channel, version, _ := strings.Cut(c, "=")
		m.Spec.Channels = append(m.Spec.Channels, v1beta2.ChannelVersionAssignment{Channel: channel, Version: version})
	}
	return m
}

func TestWriteTable(t *testing.T) {
	mandatory := meta("keda")
	mandatory.Spec.Mandatory = &v1beta2.Mandatory{Version: "2.0.0"}
	betaMeta := meta("preview", "regular=0.1.0")
	betaMeta.Spec.Beta = true
	legacyMandatory := template("legacy", "1.0.0")
	legacyMandatory.Spec.Mandatory = true

	tests := []struct {
		name      string
		templates []v1beta2.ModuleTemplate
		metas     []v1beta2.ModuleReleaseMeta
		want      []string
	}{
		{
			name:      "channels, then versions no channel points to, lowest first",
			templates: []v1beta2.ModuleTemplate{template("evolving", "2.0.0"), template("evolving", "10.0.0"), template("evolving", "1.0.0")},
			metas:     []v1beta2.ModuleReleaseMeta{meta("evolving", "regular=1.0.0", "fast=2.0.0")},
			want: []string{
				"MODULE     CHANNEL   VERSION   FLAGS   TEMPLATE",
				"evolving   fast      2.0.0     -       evolving-2.0.0",
				"evolving   regular   1.0.0     -       evolving-1.0.0",
				"evolving   -         10.0.0    -       evolving-10.0.0",
			},
		},
		{
			name:  "a channel pointing to an unpublished version shows the template missing",
			metas: []v1beta2.ModuleReleaseMeta{meta("ghost", "regular=1.0.0")},
			want: []string{
				"MODULE   CHANNEL   VERSION   FLAGS   TEMPLATE",
				"ghost    regular   1.0.0     -       <missing>",
			},
		},
		{
			name:      "mandatory by ModuleReleaseMeta, and the legacy way by template",
			templates: []v1beta2.ModuleTemplate{template("keda", "2.0.0"), legacyMandatory},
			metas:     []v1beta2.ModuleReleaseMeta{mandatory},
			want: []string{
				"MODULE   CHANNEL       VERSION   FLAGS       TEMPLATE",
				"keda     (mandatory)   2.0.0     mandatory   keda-2.0.0",
				"legacy   -             1.0.0     mandatory   legacy-1.0.0",
			},
		},
		{
			name: "beta and internal from the ModuleReleaseMeta or the template's labels",
			templates: []v1beta2.ModuleTemplate{
				template("preview", "0.1.0"),
				template("tools", "1.0.0", v1beta2.InternalLabel),
				template("tools", "1.1.0", v1beta2.BetaLabel, v1beta2.InternalLabel),
			},
			metas: []v1beta2.ModuleReleaseMeta{betaMeta, meta("tools", "regular=1.0.0", "fast=1.1.0")},
			want: []string{
				"MODULE    CHANNEL   VERSION   FLAGS           TEMPLATE",
				"preview   regular   0.1.0     beta            preview-0.1.0",
				"tools     fast      1.1.0     beta,internal   tools-1.1.0",
				"tools     regular   1.0.0     internal        tools-1.0.0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := catalog.WriteTable(&buf, catalog.Build(tt.templates, tt.metas)); err != nil {
				t.Fatal(err)
			}
			want := strings.Join(tt.want, "\n") + "\n"
			if got := buf.String(); got != want {
				t.Fatalf("WriteTable:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestBuildFirstReleaseMetaByNameWins(t *testing.T) {
	second := meta("alpha", "regular=2.0.0")
	second.Name = "b-alpha"
	first := meta("alpha", "regular=1.0.0")
	first.Name = "a-alpha"
	c := catalog.Build(nil, []v1beta2.ModuleReleaseMeta{second, first})
	if len(c.Modules) != 1 || len(c.Modules[0].Channels) != 1 || c.Modules[0].Channels[0].Version != "1.0.0" {
		t.Fatalf("Build = %+v, want alpha with regular=1.0.0 from a-alpha", c)
	}
}

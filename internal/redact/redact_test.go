package redact_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/redact"
)

const pin = "sha256=0c1a3b3c9e0c1a3b3c9e0c1a3b3c9e0c1a3b3c9e0c1a3b3c9e0c1a3b3c9e0c1a"

func TestLink(t *testing.T) {
	tests := []struct {
		name, link, want string
		ok               bool
	}{
		{name: "plain https stays", link: "https://host.example/m.yaml#" + pin, want: "https://host.example/m.yaml#" + pin, ok: true},
		{name: "user info and query go, the pin stays", link: "https://user:secret@host.example/m.yaml?token=abc#" + pin, want: "https://host.example/m.yaml#" + pin, ok: true},
		{name: "a user name alone goes (it may be a token)", link: "https://ghp_token@host.example/m.yaml", want: "https://host.example/m.yaml", ok: true},
		{name: "other fragments go", link: "https://host.example/m.yaml#access_token=abc", want: "https://host.example/m.yaml", ok: true},
		{name: "empty query marker goes", link: "https://host.example/m.yaml?", want: "https://host.example/m.yaml", ok: true},
		{name: "oci digest link stays", link: "oci://registry.example:5000/modules/a@sha256:0c1a", want: "oci://registry.example:5000/modules/a@sha256:0c1a", ok: true},
		{name: "oci user info goes", link: "oci://robot:pw@registry.example/modules/a:1.0.0", want: "oci://registry.example/modules/a:1.0.0", ok: true},
		{name: "not a URL", link: "https://host.example/%zz", ok: false},
		{name: "no scheme", link: "host.example/m.yaml", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := redact.Link(tt.link)
			g.Expect(ok).To(Equal(tt.ok))
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestText(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{name: "no URL", text: "Module is ready", want: "Module is ready"},
		{
			name: "net/http error with a redacted password and a token",
			text: `fetching rawManifest: Get "https://user:***@host.example/m.yaml?token=abc": dial tcp: refused`,
			want: `fetching rawManifest: Get "https://host.example/m.yaml": dial tcp: refused`,
		},
		{
			name: "several URLs",
			text: "tried http://a:b@one.example/x?sig=1 and https://two.example/y?sig=2#" + pin,
			want: "tried http://one.example/x and https://two.example/y#" + pin,
		},
		{name: "an unparsable URL is replaced whole", text: "at https://host.example/%zz?token=abc now", want: "at <redacted URL> now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(redact.Text(tt.text)).To(Equal(tt.want))
		})
	}
}

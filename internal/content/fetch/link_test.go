package fetch

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseLink(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	tests := []struct {
		name       string
		link       string
		wantOCI    bool
		wantHost   string
		wantURL    string
		wantDigest string
		wantErr    string
	}{
		{name: "oci by digest", link: "oci://reg.example:5000/modules/a@sha256:" + hex,
			wantOCI: true, wantHost: "reg.example:5000", wantDigest: "sha256:" + hex},
		{name: "oci by tag is unpinned", link: "oci://reg.example/modules/a:1.0.0",
			wantOCI: true, wantHost: "reg.example"},
		{name: "oci without repository", link: "oci://reg.example", wantErr: "want oci://"},
		{name: "oci with a short digest", link: "oci://reg.example/a@sha256:abc", wantErr: "64 lowercase hex digits"},
		{name: "oci with another algorithm", link: "oci://reg.example/a@sha512:" + hex, wantErr: "only sha256"},
		{name: "https pinned", link: "https://example.com/m.yaml#sha256=" + hex,
			wantHost: "example.com", wantURL: "https://example.com/m.yaml", wantDigest: "sha256:" + hex},
		{name: "http unpinned", link: "http://example.com:8080/m.yaml", wantHost: "example.com:8080", wantURL: "http://example.com:8080/m.yaml"},
		{name: "http with an upper-case pin", link: "http://example.com/m#sha256=" + strings.ToUpper(hex), wantErr: "lowercase"},
		{name: "http with another fragment", link: "http://example.com/m#v1", wantErr: "#sha256=<hex>"},
		{name: "http without host", link: "http:///m.yaml", wantErr: "no host"},
		{name: "other scheme", link: "ftp://example.com/m.yaml", wantErr: "want oci://"},
		{name: "password redacted", link: "ftp://u:s3cret@example.com/m.yaml", wantErr: "u:xxxxx@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			l, err := parseLink(tt.link)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.oci).To(Equal(tt.wantOCI))
			g.Expect(l.host).To(Equal(tt.wantHost))
			g.Expect(l.url).To(Equal(tt.wantURL))
			g.Expect(l.digest).To(Equal(tt.wantDigest))
		})
	}
}

func TestLinkStringRedactsPassword(t *testing.T) {
	g := NewWithT(t)
	l, err := parseLink("https://user:s3cret@example.com/m.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.String()).To(Equal("https://user:xxxxx@example.com/m.yaml"))
}

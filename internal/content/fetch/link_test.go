package fetch

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch/linkcorpus"
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

// Every link of the corpus is read from the host it names there, or
// refused when it names none; the admission policy must read the same
// (test/content, TestAdmissionReadsLinksAsTheOperator).
func TestParseLinkReadsTheCorpus(t *testing.T) {
	for _, c := range linkcorpus.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			l, err := parseLink(c.Link)
			if c.Host == "" {
				if err == nil {
					t.Fatalf("parseLink(%q) reads host %q, want it refused", c.Link, l.host)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseLink(%q): %v, want host %q", c.Link, err, c.Host)
			}
			if l.host != c.Host {
				t.Fatalf("parseLink(%q) reads host %q, want %q", c.Link, l.host, c.Host)
			}
		})
	}
}

// A refused link's error says why, and never quotes a password.
func TestParseLinkErrorsSayWhy(t *testing.T) {
	tests := []struct {
		link string
		want string
	}{
		{link: "https://u:s3cret@allowed.example.com/a b", want: "no spaces, control characters, backslashes or non-ASCII"},
		{link: `https://allowed.example.com\@evil.example.net/`, want: "backslashes"},
		{link: "https://u:s3cret@%C3%A9vil.example.net/m.yaml", want: "written with escapes"},
		{link: "https://u:s3cret@allowed.example.com./m.yaml", want: "neither a DNS name"},
		{link: "http://u:s3cret@[2001:db8:0::1]/m.yaml", want: "canonical form"},
		{link: "http://u:s3cret@[fe80::1%25eth0]/m.yaml", want: "written with escapes"},
		{link: "http://u:s3cret@[::ffff:127.0.0.1]/m.yaml", want: "not IPv4-mapped"},
		{link: "https://u:s3cret@allowed.example.com:0/m.yaml", want: "port must be 1 to 65535"},
		{link: "https://u:s3cret@allowed.example.com:/m.yaml", want: "empty port"},
		{link: "https://u:s3cret@evil.example.net#@allowed.example.com/", want: "invalid"},
		{link: "oci://robot:s3cret@allowed.example.com/modules/a:1", want: "carries no user info"},
		{link: "oci://registry/modules/a:1", want: "which is read as index.docker.io"},
		{link: "oci://docker.io/library/a:1", want: "which is read as index.docker.io"},
		{link: "oci://127.1:5000/modules/a:1", want: "neither a DNS name"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		_, err := parseLink(tt.link)
		g.Expect(err).To(MatchError(ContainSubstring(tt.want)), "%s", tt.link)
		g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"), "%s", tt.link)
	}
}

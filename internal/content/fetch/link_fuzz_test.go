package fetch

import (
	"net/url"
	"strings"
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch/linkcorpus"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// FuzzParseLink feeds parseLink (and the host policy, which reads what it
// returns) with links of the sample modules' shapes, odd ones and the
// links parsers read differently (linkcorpus). It must never panic; what
// it accepts must be well-formed and name the host net/url reads; a
// password in a link must never come out of String or an error.
func FuzzParseLink(f *testing.F) {
	hex := strings.Repeat("ab", 32)
	versions, err := samplemodules.All()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range versions {
		f.Add("oci://127.0.0.1:5000/modules/" + v.Module + "@sha256:" + hex)
		f.Add("oci://registry.example.com/modules/" + v.Module + ":" + v.Version)
		f.Add("https://charts.example.com/" + v.Module + "/" + v.Version + "/manifest.yaml#sha256=" + hex)
	}
	for _, odd := range []string{
		"", "oci://", "oci:///a", "oci://h/", "oci://h/a@", "oci://h/a@sha256:", "oci://[::1]:5000/a@sha256:" + hex,
		"http://", "http:///x", "https://u:s3cret@h/x#sha256=" + hex, "https://h/x#", "https://h/x#sha256=",
		"https://h/x#sha256=" + strings.ToUpper(hex), "https://h:99999/x", "https://h/%zz", "HTTPS://h/x",
		"https://169.254.169.254/latest/meta-data", "http://0x7f.1/x", "http://[fe80::1%25eth0]/x",
		"oci://h/a@sha256:" + hex + "@sha256:" + hex, "https://h/x?token=s3cret#sha256=" + hex, "\x00", "oci://\n/a",
	} {
		f.Add(odd)
	}
	for _, c := range linkcorpus.Cases() {
		f.Add(c.Link)
	}
	policy := hostPolicy{allowed: []string{"registry.example.com", "*.example.com", "127.0.0.1:5000"}, insecure: map[string]bool{}}
	f.Fuzz(func(t *testing.T, raw string) {
		l, err := parseLink(raw)
		password := ""
		if u, perr := url.Parse(raw); perr == nil && u.User != nil {
			password, _ = u.User.Password()
		}
		if err != nil {
			if len(password) > 3 && strings.Contains(err.Error(), ":"+password+"@") {
				t.Fatalf("error shows the password: %v", err)
			}
			return
		}
		if l.oci && (l.host == "" || strings.Contains(l.host, "/")) {
			t.Fatalf("oci link %q parsed with host %q", raw, l.host)
		}
		if !l.oci && l.url == "" {
			t.Fatalf("http link %q parsed without URL", raw)
		}
		// What is accepted reads one way: its host is the one net/url
		// (and so the admission policy's url()) reads, as written.
		if strings.ContainsAny(l.host, "@%\\ ") || l.host != strings.ToLower(l.host) {
			t.Fatalf("link %q parsed with host %q", raw, l.host)
		}
		if !l.oci {
			if u, err := url.Parse(raw); err != nil || strings.ToLower(u.Host) != l.host {
				t.Fatalf("link %q parsed with host %q, net/url reads %v (%v)", raw, l.host, u, err)
			}
		}
		if l.digest != "" {
			if err := validateDigest(l.digest); err != nil {
				t.Fatalf("accepted digest %q: %v", l.digest, err)
			}
			if !l.oci {
				again, err := parseLink(pinnedHTTPLink(l, l.digest))
				if err != nil || again.digest != l.digest || again.url != l.url {
					t.Fatalf("pinning %q again gives %+v, %v", raw, again, err)
				}
			}
		}
		if !l.oci && len(password) > 3 && strings.Contains(l.String(), ":"+password+"@") {
			t.Fatalf("String shows the password: %s", l)
		}
		_ = policy.permits(l.host)
		_ = policy.listed(l.host)
	})
}

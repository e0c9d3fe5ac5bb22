// Package linkcorpus holds content links that URL parsers are known to read
// differently: user info and '@' hidden behind '?', '#' or '\', escapes in
// the host, IP addresses in their many spellings, odd ports, whitespace. Two
// parsers judge every link of a ModuleTemplate, the admission policy
// (config/admission, CEL) and the operator (internal/content/fetch); the
// corpus says what both must read in each link, and the differential test
// in test/content checks that they do. The fetch package's fuzz test starts
// from it.
package linkcorpus

import "strings"

// A Case is a link and what both parsers must read in it.
type Case struct {
	// Name says what is tricky about the link.
	Name string
	Link string
	// Host is the host[:port] the link is read from, lower-cased, as it is
	// matched against the allowed hosts; empty when the link must be
	// refused as one that does not read one way only.
	Host string
}

// AllowedHosts is an allow-list (--content-allowed-hosts, and the
// admission ConfigMap's allowedHosts) with an entry of each kind, under
// which both parsers must also give the same verdict on every case.
var AllowedHosts = []string{"allowed.example.com", "*.example.org", "127.0.0.1:5000", "[::1]:5000", "[2001:db8::1]", "localhost"}

// Cases are the links.
func Cases() []Case {
	hex := strings.Repeat("ab", 32)
	pin := "#sha256=" + hex
	digest := "@sha256:" + hex
	return []Case{
		// http(s) links that read one way.
		{Name: "plain", Link: "https://allowed.example.com/m.yaml", Host: "allowed.example.com"},
		{Name: "pinned", Link: "https://allowed.example.com/m.yaml" + pin, Host: "allowed.example.com"},
		{Name: "port", Link: "https://allowed.example.com:8443/m.yaml", Host: "allowed.example.com:8443"},
		{Name: "highest port", Link: "https://allowed.example.com:65535/m.yaml", Host: "allowed.example.com:65535"},
		{Name: "query and no path", Link: "https://allowed.example.com?x=1" + pin, Host: "allowed.example.com"},
		{Name: "upper-case host", Link: "https://ALLOWED.Example.COM/m.yaml", Host: "allowed.example.com"},
		{Name: "user info on an allowed host", Link: "https://user:pw@allowed.example.com/m.yaml" + pin, Host: "allowed.example.com"},
		{Name: "subdomain of a wildcard", Link: "https://charts.example.org/c.tgz", Host: "charts.example.org"},
		{Name: "domain of a wildcard itself", Link: "https://example.org/c.tgz", Host: "example.org"},
		{Name: "look-alike domain", Link: "https://allowed.example.com.evil.example.net/m.yaml", Host: "allowed.example.com.evil.example.net"},
		{Name: "localhost", Link: "http://localhost:8080/m.yaml", Host: "localhost:8080"},
		{Name: "IPv4", Link: "http://127.0.0.1:5000/m.yaml", Host: "127.0.0.1:5000"},
		{Name: "IPv6 loopback", Link: "http://[::1]:5000/m.yaml", Host: "[::1]:5000"},
		{Name: "IPv6 without port", Link: "http://[2001:db8::1]/m.yaml", Host: "[2001:db8::1]"},
		{Name: "IPv6 upper-case", Link: "http://[2001:DB8::1]/m.yaml", Host: "[2001:db8::1]"},

		// An '@' that is not where the host starts, to the parsers that
		// split on it: both read the host net/url reads.
		{Name: "query hides an @", Link: "https://evil.example.net?@allowed.example.com/m.yaml", Host: "evil.example.net"},
		{Name: "query after a path hides an @", Link: "https://evil.example.net/?x=@allowed.example.com/", Host: "evil.example.net"},
		{Name: "user info names the allowed host", Link: "https://allowed.example.com@evil.example.net/m.yaml", Host: "evil.example.net"},
		{Name: "two @", Link: "https://a@allowed.example.com@evil.example.net/m.yaml", Host: "evil.example.net"},
		{Name: "%40 in user info", Link: "https://allowed.example.com%40x@evil.example.net/m.yaml", Host: "evil.example.net"},

		// http(s) links refused: they read more than one way, or not at all.
		{Name: "fragment hides an @", Link: "https://evil.example.net#@allowed.example.com/m.yaml"},
		{Name: "backslash before @", Link: `https://allowed.example.com\@evil.example.net/m.yaml`},
		{Name: "backslash as a slash", Link: `https://evil.example.net\.allowed.example.com/m.yaml`},
		{Name: "backslash in the path", Link: `https://allowed.example.com/a\b.yaml`},
		{Name: "%40 in the host", Link: "https://allowed.example.com%40evil.example.net/m.yaml"},
		{Name: "percent-encoded host", Link: "https://%61llowed.example.com/m.yaml"},
		{Name: "percent-encoded non-ASCII host", Link: "https://%C3%A9vil.example.net/m.yaml"},
		{Name: "non-ASCII host", Link: "https://évil.example.net/m.yaml"},
		{Name: "IPv6 not canonical", Link: "http://[2001:db8:0::1]/m.yaml"},
		{Name: "IPv6 with zone", Link: "http://[fe80::1%25eth0]/m.yaml"},
		{Name: "IPv4-mapped IPv6", Link: "http://[::ffff:127.0.0.1]/m.yaml"},
		{Name: "IPv4 in brackets", Link: "http://[127.0.0.1]/m.yaml"},
		{Name: "IPv6 without brackets", Link: "http://::1/m.yaml"},
		{Name: "IPv4 short form", Link: "http://127.1/m.yaml"},
		{Name: "IPv4 in hex", Link: "http://0x7f.0.0.1/m.yaml"},
		{Name: "IPv4 as one number", Link: "http://2130706433/m.yaml"},
		{Name: "IPv4 with a leading zero", Link: "http://0127.0.0.1/m.yaml"},
		{Name: "numeric last label", Link: "https://example.123/m.yaml"},
		{Name: "underscore in the host", Link: "https://my_registry.example.com/m.yaml"},
		{Name: "label of 64 characters", Link: "https://" + strings.Repeat("a", 64) + ".example.com/m.yaml"},
		{Name: "trailing dot", Link: "https://allowed.example.com./m.yaml"},
		{Name: "missing host", Link: "https:///m.yaml"},
		{Name: "user info and no host", Link: "https://user@/m.yaml"},
		{Name: "port 0", Link: "https://allowed.example.com:0/m.yaml"},
		{Name: "port 65536", Link: "https://allowed.example.com:65536/m.yaml"},
		{Name: "port not a number", Link: "https://allowed.example.com:https/m.yaml"},
		{Name: "empty port", Link: "https://allowed.example.com:/m.yaml"},
		{Name: "port with a leading zero", Link: "https://allowed.example.com:0443/m.yaml"},
		{Name: "upper-case scheme", Link: "HTTPS://allowed.example.com/m.yaml"},
		{Name: "other scheme", Link: "ftp://allowed.example.com/m.yaml"},
		{Name: "no scheme", Link: "allowed.example.com/m.yaml"},
		{Name: "scheme-relative", Link: "//allowed.example.com/m.yaml"},
		{Name: "no slashes after the scheme", Link: "https:allowed.example.com/m.yaml"},
		{Name: "leading space", Link: " https://allowed.example.com/m.yaml"},
		{Name: "trailing space", Link: "https://allowed.example.com/m.yaml "},
		{Name: "space in the path", Link: "https://allowed.example.com/a b.yaml"},
		{Name: "tab in the host", Link: "https://allowed.example.com\t.evil.example.net/m.yaml"},
		{Name: "newline between two links", Link: "https://allowed.example.com/m.yaml\nhttps://evil.example.net/m.yaml"},
		{Name: "DEL character", Link: "https://allowed.example.com/m\x7f.yaml"},
		{Name: "empty", Link: ""},
		{Name: "other fragment", Link: "https://allowed.example.com/m.yaml#v1"},
		{Name: "upper-case pin", Link: "https://allowed.example.com/m.yaml#sha256=" + strings.ToUpper(hex)},
		{Name: "short pin", Link: "https://allowed.example.com/m.yaml#sha256=abc"},
		{Name: "two fragments", Link: "https://allowed.example.com/m.yaml" + pin + "#x"},
		{Name: "pin without a path", Link: "https://allowed.example.com" + pin},

		// oci:// links that read one way.
		{Name: "oci by digest", Link: "oci://allowed.example.com/modules/a" + digest, Host: "allowed.example.com"},
		{Name: "oci by tag", Link: "oci://allowed.example.com/modules/a:1.0.0", Host: "allowed.example.com"},
		{Name: "oci by tag and digest", Link: "oci://allowed.example.com/modules/a:1.0.0" + digest, Host: "allowed.example.com"},
		{Name: "oci without tag", Link: "oci://allowed.example.com/modules/a", Host: "allowed.example.com"},
		{Name: "oci with port", Link: "oci://127.0.0.1:5000/modules/a" + digest, Host: "127.0.0.1:5000"},
		{Name: "oci on IPv6", Link: "oci://[::1]:5000/modules/a" + digest, Host: "[::1]:5000"},
		{Name: "oci on localhost", Link: "oci://localhost/modules/a:1", Host: "localhost"},
		{Name: "oci on a name without dot, with port", Link: "oci://registry:5000/modules/a:1", Host: "registry:5000"},
		{Name: "oci upper-case registry", Link: "oci://ALLOWED.example.com/modules/a:1", Host: "allowed.example.com"},

		// oci:// links refused.
		{Name: "oci registry read as Docker Hub", Link: "oci://registry/modules/a:1"},
		{Name: "oci docker.io read as index.docker.io", Link: "oci://docker.io/library/a:1"},
		{Name: "oci upper-case localhost read as Docker Hub", Link: "oci://LOCALHOST/modules/a:1"},
		{Name: "oci user info", Link: "oci://robot:pw@allowed.example.com/modules/a:1"},
		{Name: "oci user info names the allowed host", Link: "oci://allowed.example.com@evil.example.net/modules/a:1"},
		{Name: "oci query hides an @", Link: "oci://evil.example.net?@allowed.example.com/modules/a:1"},
		{Name: "oci query after the tag", Link: "oci://allowed.example.com/modules/a:1?x=@evil.example.net"},
		{Name: "oci percent-encoded host", Link: "oci://%61llowed.example.com/modules/a:1"},
		{Name: "oci IPv4 short form", Link: "oci://127.1:5000/modules/a:1"},
		{Name: "oci trailing dot", Link: "oci://allowed.example.com./modules/a:1"},
		{Name: "oci port 0", Link: "oci://allowed.example.com:0/modules/a:1"},
		{Name: "oci missing host", Link: "oci:///modules/a" + digest},
		{Name: "oci without repository", Link: "oci://allowed.example.com"},
		{Name: "oci upper-case repository", Link: "oci://allowed.example.com/Modules/A:1"},
		{Name: "oci empty tag", Link: "oci://allowed.example.com/modules/a:"},
		{Name: "oci short digest", Link: "oci://allowed.example.com/modules/a@sha256:abc"},
		{Name: "oci other algorithm", Link: "oci://allowed.example.com/modules/a@sha512:" + hex + hex},
		{Name: "oci two digests", Link: "oci://allowed.example.com/modules/a" + digest + digest},
		{Name: "oci space in the reference", Link: "oci://allowed.example.com/modules/a :1"},
		{Name: "oci upper-case scheme", Link: "OCI://allowed.example.com/modules/a:1"},
		{Name: "registry reference without scheme", Link: "allowed.example.com/modules/a:1"},
	}
}

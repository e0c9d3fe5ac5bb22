package fetch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

const (
	ociScheme      = "oci://"
	httpPinPrefix  = "sha256="
	digestAlgoName = "sha256:"
)

// link is a parsed content link.
type link struct {
	// raw is the link as written.
	raw string
	// oci is true for oci:// links, false for http(s) URLs.
	oci bool
	// host is the registry host of an oci:// link, or the host (host:port)
	// of an http(s) URL.
	host string
	// url is an http(s) link without its #sha256= fragment.
	url string
	// digest is sha256:<hex>, or empty when the link is not pinned.
	digest string
}

// String is the link as it may appear in errors and logs: the user info of
// an http(s) URL is redacted, as it may hold a password.
func (l link) String() string {
	if l.oci {
		return l.raw
	}
	u, err := url.Parse(l.raw)
	if err != nil {
		return l.raw
	}
	return u.Redacted()
}

// parseLink reads a link as the admission policy of config/admission does,
// so that both judge the same host: a policy that sees one host while the
// operator connects to another is no check at all. Both read a link with
// Go's net/url (CEL's url() is net/url), and both refuse a link that does
// not read one way only: whitespace, control characters, non-ASCII
// characters and backslashes, which other parsers (browsers, curl, the
// WHATWG URL standard) read differently; a host written with escapes; a
// host that is not a DNS name, a dotted-decimal IPv4 address or a
// canonical IPv6 address in brackets; a port outside 1-65535 or with
// leading zeros; and any fragment but the #sha256= pin. The differential
// test of test/content holds the two to the corpus of
// internal/content/fetch/linkcorpus.
func parseLink(raw string) (link, error) {
	if err := checkCharacters(raw); err != nil {
		return link{}, fmt.Errorf("link %q: %w", redact(raw), err)
	}
	if rest, ok := strings.CutPrefix(raw, ociScheme); ok {
		return parseOCILink(raw, rest)
	}
	if strings.HasPrefix(raw, "https://") || strings.HasPrefix(raw, "http://") {
		return parseHTTPLink(raw)
	}
	return link{}, fmt.Errorf("link %q: want oci://host/repo@sha256:…, oci://host/repo:tag or an http(s) URL", redact(raw))
}

// checkCharacters accepts printable ASCII without backslashes: what a link
// needs, written with escapes where a path or query needs more.
func checkCharacters(raw string) error {
	if raw == "" {
		return errors.New("is empty")
	}
	for i := range len(raw) {
		if c := raw[i]; c <= ' ' || c > '~' || c == '\\' {
			return fmt.Errorf("has %q at byte %d: a link holds no spaces, control characters, backslashes or non-ASCII characters (escape them in the path)", c, i)
		}
	}
	return nil
}

// parseOCILink reads an oci:// link with go-containerregistry, the library
// that then reaches the registry, and refuses it unless the registry it
// reaches is the host the link names: go-containerregistry reads a first
// part without a dot, a port or "localhost" as a repository on Docker Hub,
// and docker.io as index.docker.io.
func parseOCILink(raw, rest string) (link, error) {
	written, path, hasRepository := strings.Cut(rest, "/")
	if !hasRepository || written == "" || path == "" {
		return link{}, fmt.Errorf("link %q: want oci://host/repo@sha256:… or oci://host/repo:tag", raw)
	}
	if strings.Contains(written, "@") {
		// Checked before go-containerregistry, whose errors would quote
		// the password.
		return link{}, fmt.Errorf("link %q: an oci:// link carries no user info; registry credentials come from the operator's --registry-credentials-secret", redact(raw))
	}
	l := link{raw: raw, oci: true}
	if _, digest, pinned := strings.Cut(path, "@"); pinned {
		if err := validateDigest(digest); err != nil {
			return link{}, fmt.Errorf("link %q: %w", raw, err)
		}
		l.digest = digest
	}
	ref, err := name.ParseReference(rest)
	if err != nil {
		return link{}, fmt.Errorf("link %q: want oci://host/repo@sha256:… or oci://host/repo:tag: %w", raw, err)
	}
	if registry := ref.Context().RegistryStr(); registry != written {
		return link{}, fmt.Errorf("link %q names registry %q, which is read as %s: write the registry host in full (with a dot, a port, or localhost)", raw, written, registry)
	}
	if l.host, err = checkHost(&url.URL{Host: written}); err != nil {
		return link{}, fmt.Errorf("link %q: %w", raw, err)
	}
	return l, nil
}

func parseHTTPLink(raw string) (link, error) {
	// The CRD's format: uri and CEL's isURL() read links with
	// ParseRequestURI, which refuses some that Parse takes (a '#' before
	// the path): such a link is never admitted, so it is not read either.
	if _, err := url.ParseRequestURI(raw); err != nil {
		return link{}, fmt.Errorf("link %q: %w", redact(raw), causeOf(err))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return link{}, fmt.Errorf("link %q: %w", redact(raw), causeOf(err))
	}
	if u.Host == "" {
		return link{}, fmt.Errorf("link %q has no host", u.Redacted())
	}
	if written := hostAsWritten(raw); u.Host != written {
		return link{}, fmt.Errorf("link %q: its host %q is written with escapes", u.Redacted(), written)
	}
	host, err := checkHost(u)
	if err != nil {
		return link{}, fmt.Errorf("link %q: %w", u.Redacted(), err)
	}
	l := link{raw: raw, host: host}
	base, fragment, hasFragment := strings.Cut(raw, "#")
	l.url = base
	if !hasFragment {
		return l, nil
	}
	sum, ok := strings.CutPrefix(fragment, httpPinPrefix)
	if !ok {
		return link{}, fmt.Errorf("link %q: the only fragment understood is #sha256=<hex>", u.Redacted())
	}
	l.digest = digestAlgoName + sum
	if err := validateDigest(l.digest); err != nil {
		return link{}, fmt.Errorf("link %q: %w", u.Redacted(), err)
	}
	return l, nil
}

// hostAsWritten is the host[:port] of a URL as its text has it: from ://
// to the first '/', '?' or '#', after the last '@', which is how net/url
// splits it.
func hostAsWritten(raw string) string {
	_, authority, _ := strings.Cut(raw, "://")
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	return authority[strings.LastIndex(authority, "@")+1:]
}

// dnsName is a host name of letters, digits and hyphens in labels of up to
// 63 characters, whose last label starts with a letter: a name whose last
// label is a number is an IPv4 address to other parsers (127.1,
// 2130706433, 0x7f.1).
var dnsName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)*[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// portNumber is a TCP port without leading zeros (0 and numbers above
// 65535 are refused after).
var portNumber = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)

// checkHost accepts the host of a URL when it reads one way only: a DNS
// name, a dotted-decimal IPv4 address, or an IPv6 address in brackets,
// canonical (as netip writes it) and without a zone, so that it is matched
// against the allowed hosts as a string; with a port of 1-65535 if any. It
// returns the host lower-cased, as the allowed hosts are matched.
func checkHost(u *url.URL) (string, error) {
	host, hostname := strings.ToLower(u.Host), strings.ToLower(u.Hostname())
	if strings.HasSuffix(host, ":") {
		return "", fmt.Errorf("host %q has an empty port", u.Host)
	}
	addr, err := netip.ParseAddr(hostname)
	switch {
	case strings.HasPrefix(host, "["):
		if err != nil || !addr.Is6() || addr.Is4In6() || addr.Zone() != "" || addr.String() != hostname {
			return "", fmt.Errorf("host %q: brackets must hold an IPv6 address in canonical form (lower-case, shortest), without zone, not IPv4-mapped", u.Host)
		}
	case err == nil && addr.Is4():
	case len(hostname) > 253 || !dnsName.MatchString(hostname):
		return "", fmt.Errorf("host %q is neither a DNS name (letters, digits, hyphens; the last label starts with a letter; no trailing dot) nor a dotted-decimal IPv4 address", u.Host)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); !portNumber.MatchString(p) || err != nil || n > 65535 {
			return "", fmt.Errorf("host %q: the port must be 1 to 65535, without leading zeros", u.Host)
		}
	}
	return host, nil
}

// causeOf drops the *url.Error around a parse error: it quotes the whole
// URL, password included.
func causeOf(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// redact hides the user info of what may be a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// validateDigest accepts sha256:<64 lowercase hex digits>, the only digest
// that content is verified and cached by.
func validateDigest(digest string) error {
	sum, ok := strings.CutPrefix(digest, digestAlgoName)
	if !ok {
		return fmt.Errorf("digest %q: only sha256 is supported", digest)
	}
	if len(sum) != hex.EncodedLen(sha256.Size) || strings.Trim(sum, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %q: want sha256: and 64 lowercase hex digits", digest)
	}
	return nil
}

// digestOf returns the sha256:<hex> digest of data.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return digestAlgoName + hex.EncodeToString(sum[:])
}

// pinnedHTTPLink is an http(s) link pinned to a digest.
func pinnedHTTPLink(l link, digest string) string {
	return l.url + "#" + httpPinPrefix + strings.TrimPrefix(digest, digestAlgoName)
}

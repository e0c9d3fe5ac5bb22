package fetch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
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

func parseLink(raw string) (link, error) {
	if rest, ok := strings.CutPrefix(raw, ociScheme); ok {
		return parseOCILink(raw, rest)
	}
	if strings.HasPrefix(raw, "https://") || strings.HasPrefix(raw, "http://") {
		return parseHTTPLink(raw)
	}
	return link{}, fmt.Errorf("link %q: want oci://host/repo@sha256:…, oci://host/repo:tag or an http(s) URL", redact(raw))
}

func parseOCILink(raw, rest string) (link, error) {
	host, path, _ := strings.Cut(rest, "/")
	if host == "" || path == "" {
		return link{}, fmt.Errorf("link %q: want oci://host/repo@sha256:… or oci://host/repo:tag", raw)
	}
	l := link{raw: raw, oci: true, host: host}
	if _, digest, pinned := strings.Cut(path, "@"); pinned {
		if err := validateDigest(digest); err != nil {
			return link{}, fmt.Errorf("link %q: %w", raw, err)
		}
		l.digest = digest
	}
	return l, nil
}

func parseHTTPLink(raw string) (link, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return link{}, fmt.Errorf("link %q: %w", redact(raw), err)
	}
	if u.Host == "" {
		return link{}, fmt.Errorf("link %q has no host", u.Redacted())
	}
	l := link{raw: raw, host: u.Host}
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

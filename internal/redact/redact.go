// Package redact removes credentials from content links, and from text that
// quotes them, before either leaves the control plane. A link may carry a
// password in its user info or a token in its query (a pre-signed URL); the
// operator needs them to fetch, a runtime never does (SPEC "Trust
// boundaries": no credential ever reaches a runtime).
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// pinPrefix starts the only fragment a link keeps: its #sha256=<hex> pin,
// which says what the content is and carries no secret.
const pinPrefix = "sha256="

// Link returns link without user info, query or any fragment other than a
// #sha256= pin. ok is false when link cannot be parsed as a URL; the caller
// must then drop it rather than pass it on as written.
func Link(link string) (string, bool) {
	u, err := url.Parse(link)
	if err != nil || u.Scheme == "" {
		return "", false
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	if !strings.HasPrefix(u.Fragment, pinPrefix) {
		u.Fragment = ""
		u.RawFragment = ""
	}
	return u.String(), true
}

// urlPattern finds URLs in free text: a scheme, "://", and everything up to
// white space or a quote. Trailing punctuation is taken along, which is
// harmless: it ends up in the path or the query, and the query is dropped.
var urlPattern = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'<>`]+")

// Text returns s with every URL in it passed through Link. A URL that does
// not parse is replaced whole, since what it holds is unknown.
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlPattern.ReplaceAllStringFunc(s, func(found string) string {
		if clean, ok := Link(found); ok {
			return clean
		}
		return "<redacted URL>"
	})
}

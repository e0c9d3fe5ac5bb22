package ociartifact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// withoutBody replaces a registry's error answer by its status and error
// codes. go-containerregistry's transport.Error repeats the registry's
// messages and, when it cannot parse them, its raw response body; those are
// the registry's words and must not reach a status, an event or a log.
func withoutBody(err error) error {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return err
	}
	var b strings.Builder
	if terr.Request != nil {
		fmt.Fprintf(&b, "%s %s://%s%s: ", terr.Request.Method, terr.Request.URL.Scheme, terr.Request.URL.Host, terr.Request.URL.Path)
	}
	fmt.Fprintf(&b, "registry answered %d %s", terr.StatusCode, http.StatusText(terr.StatusCode))
	codes := make([]string, 0, len(terr.Errors))
	for _, d := range terr.Errors {
		// Codes are the registry's too: keep only what looks like one.
		if code := string(d.Code); len(code) <= 32 && code != "" && strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == "" {
			codes = append(codes, code)
		}
	}
	switch {
	case len(codes) > 0:
		fmt.Fprintf(&b, " (%s)", strings.Join(codes, ", "))
	case terr.StatusCode == http.StatusNotFound && terr.Request != nil && strings.Contains(terr.Request.URL.Path, "/blobs/"):
		// A HEAD answer has no body to carry BLOB_UNKNOWN; say it.
		b.WriteString(" (the registry has no such layer)")
	}
	return &RegistryError{StatusCode: terr.StatusCode, message: b.String()}
}

// RegistryError is a registry's error answer without its body: the request,
// the HTTP status and well-formed error codes. StatusCode lets callers add
// what only they know, such as where credentials come from.
type RegistryError struct {
	StatusCode int
	message    string
}

func (e *RegistryError) Error() string { return e.message }

// WithoutBody is a registry error without the registry's own words (see
// withoutBody), for other packages that talk to registries.
func WithoutBody(err error) error { return withoutBody(err) }

// ReadLayer reads a layer whole within maxBytes (see readLayer).
func ReadLayer(ctx context.Context, layer v1.Layer, maxBytes int64) ([]byte, error) {
	data, err := readLayer(ctx, layer, options{maxBytes: maxBytes})
	return data, withoutBody(err)
}

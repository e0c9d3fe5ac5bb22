// Package testregistry runs an OCI registry in-process on loopback. It speaks
// the real distribution protocol (go-containerregistry's registry), so tests,
// benchmarks and the dev environment exercise the same client code as
// production does against a real registry.
package testregistry

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is a running in-process registry, served over plain HTTP on
// 127.0.0.1.
type Registry struct {
	server *httptest.Server
}

// Start serves a new, empty registry.
func Start() *Registry {
	handler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return &Registry{server: httptest.NewServer(handler)}
}

// Host is the registry's host:port, as used in image references.
func (r *Registry) Host() string {
	return strings.TrimPrefix(r.server.URL, "http://")
}

// Close stops serving and drops everything pushed.
func (r *Registry) Close() {
	r.server.Close()
}

// Package testregistry runs an OCI registry in-process on loopback. It speaks
// the real distribution protocol (go-containerregistry's registry), so tests,
// benchmarks and the dev environment exercise the same client code as
// production does against a real registry. It is open to all by default;
// WithBasicAuth or WithTokenAuth make it require a login, as private
// registries do (auth.go).
package testregistry

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is a running in-process registry, served over plain HTTP on
// 127.0.0.1.
type Registry struct {
	handler http.Handler
	addr    string
	// login is who may use it; nil: everyone.
	login *login

	mu     sync.Mutex
	server *httptest.Server
}

// Start serves a new, empty registry.
func Start(opts ...Option) *Registry {
	r := &Registry{handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	for _, o := range opts {
		o(r)
	}
	r.server = httptest.NewServer(r.handler)
	r.addr = r.server.Listener.Addr().String()
	return r
}

// Host is the registry's host:port, as used in image references.
func (r *Registry) Host() string {
	return strings.TrimPrefix(r.addr, "http://")
}

// Stop stops serving but keeps what was pushed, so that Restart can bring
// the same registry back: a registry outage, as clients see it.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server != nil {
		r.server.Close()
		r.server = nil
	}
}

// Restart serves the registry again on the same address after Stop.
func (r *Registry) Restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server != nil {
		return nil
	}
	listener, err := net.Listen("tcp", r.addr)
	if err != nil {
		return err
	}
	server := httptest.NewUnstartedServer(r.handler)
	server.Listener.Close()
	server.Listener = listener
	server.Start()
	r.server = server
	return nil
}

// Close stops serving and drops everything pushed.
func (r *Registry) Close() {
	r.Stop()
}

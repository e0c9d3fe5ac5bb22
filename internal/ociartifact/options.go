package ociartifact

import (
	"context"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Option changes how a registry is reached.
type Option func(*options)

type options struct {
	nameOptions []name.Option
	keychain    authn.Keychain
	transport   http.RoundTripper
}

// Insecure reaches the registry over plain HTTP, as local and test registries
// on loopback are served.
func Insecure() Option {
	return func(o *options) { o.nameOptions = append(o.nameOptions, name.Insecure) }
}

// WithKeychain authenticates with the given credentials, e.g. from a
// dockerconfigjson Secret.
func WithKeychain(k authn.Keychain) Option {
	return func(o *options) { o.keychain = k }
}

// WithTransport uses the given HTTP transport, e.g. one that trusts a private
// CA or is shared for connection reuse.
func WithTransport(t http.RoundTripper) Option {
	return func(o *options) { o.transport = t }
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (o options) remoteOptions(ctx context.Context) []remote.Option {
	ro := []remote.Option{remote.WithContext(ctx)}
	if o.keychain != nil {
		ro = append(ro, remote.WithAuthFromKeychain(o.keychain))
	}
	if o.transport != nil {
		ro = append(ro, remote.WithTransport(o.transport))
	}
	return ro
}

// readLayer reads a layer whole. go-containerregistry verifies the bytes
// against the digest while they stream, so a misbehaving registry cannot
// substitute content.
func readLayer(layer v1.Layer) ([]byte, error) {
	rc, err := layer.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

package ociartifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ErrTooLarge is the cause of every refusal of content above a size cap.
var ErrTooLarge = errors.New("content is larger than the size limit")

// Option changes how a registry is reached.
type Option func(*options)

type options struct {
	nameOptions []name.Option
	keychain    authn.Keychain
	transport   http.RoundTripper
	maxBytes    int64
	reserve     func(ctx context.Context, declared int64) (release func(), err error)
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

// WithMaxBytes bounds a layer FetchLayer reads: one whose registry declares
// more is refused before it is downloaded, and one that streams more than
// declared is refused while it streams. 0 or less leaves layers unbounded.
func WithMaxBytes(n int64) Option {
	return func(o *options) { o.maxBytes = n }
}

// WithReserve makes FetchLayer call reserve with the layer's declared size
// (-1 when the registry declares none) before the download and release
// after it, e.g. to keep all downloads in flight within a memory budget.
func WithReserve(reserve func(ctx context.Context, declared int64) (release func(), err error)) Option {
	return func(o *options) { o.reserve = reserve }
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

// readLayer reads a layer whole, within the size the registry declared
// (HEAD) and the cap. go-containerregistry verifies the bytes against the
// digest while they stream, so a misbehaving registry cannot substitute
// content; the bound keeps one that sends more than it declared from
// filling memory first.
func readLayer(ctx context.Context, layer v1.Layer, o options) ([]byte, error) {
	declared, err := layer.Size()
	if err != nil {
		return nil, err
	}
	if o.maxBytes > 0 && declared > o.maxBytes {
		return nil, fmt.Errorf("%w: the registry declares %d bytes, the limit is %d", ErrTooLarge, declared, o.maxBytes)
	}
	if o.reserve != nil {
		release, err := o.reserve(ctx, declared)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	bound := o.maxBytes
	if declared >= 0 && (bound <= 0 || declared < bound) {
		bound = declared
	}
	if bound <= 0 && declared < 0 {
		return io.ReadAll(rc)
	}
	var buf bytes.Buffer
	if declared > 0 {
		buf.Grow(int(declared))
	}
	n, err := buf.ReadFrom(io.LimitReader(rc, bound+1))
	if err != nil {
		return nil, err
	}
	if n > bound {
		if bound == declared {
			return nil, fmt.Errorf("%w: the registry declared %d bytes and sends more", ErrTooLarge, declared)
		}
		return nil, fmt.Errorf("%w: the layer goes on past %d bytes", ErrTooLarge, bound)
	}
	return buf.Bytes(), nil
}

// Remote returns the go-containerregistry options that opts stand for, so
// that other packages that talk to registries (signing) reach them exactly
// as FetchLayer does: same transport, credentials and plain-HTTP hosts.
func Remote(ctx context.Context, opts ...Option) ([]name.Option, []remote.Option) {
	o := newOptions(opts)
	return o.nameOptions, o.remoteOptions(ctx)
}

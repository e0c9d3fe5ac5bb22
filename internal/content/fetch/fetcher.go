package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// Fetcher reads module content by pinned link, through its caches. One
// Fetcher is shared by all reconciles: it is safe for concurrent use, and
// concurrent fetches of one digest share one download.
type Fetcher struct {
	cfg    config
	policy hostPolicy
	budget *budget
	// http reads http(s) links; registry is the transport of registry
	// clients. Both check every request against the policy and cap bodies.
	http     *http.Client
	registry http.RoundTripper
	memory   *memoryCache // nil when turned off
	disk     *diskCache   // nil when turned off
	flights  singleflight.Group

	// joined, when set by a test, is called each time a Fetch waits on a
	// download, its own or one in flight already.
	joined func()
}

// New returns a Fetcher. It fails only when the disk cache directory cannot
// be created.
func New(opts ...Option) (*Fetcher, error) {
	cfg := newConfig(opts)
	policy := hostPolicy{allowed: cfg.allowedHosts, insecure: cfg.insecureHosts}
	base := cfg.transport
	if base == nil {
		base = newDialingTransport(policy)
	}
	httpGuard := &guard{next: base, policy: policy, maxBytes: cfg.maxBytes}
	f := &Fetcher{
		cfg:      cfg,
		policy:   policy,
		budget:   newBudget(cfg.inFlightBytes, cfg.maxBytes),
		http:     &http.Client{Transport: httpGuard, CheckRedirect: httpGuard.checkHTTPRedirect},
		registry: &guard{next: base, policy: policy, maxBytes: cfg.maxBytes, registry: true},
	}
	if cfg.memoryCacheSize > 0 {
		f.memory = newMemoryCache(cfg.memoryCacheSize)
	}
	if cfg.diskCacheDir != "" {
		disk, err := newDiskCache(cfg.diskCacheDir)
		if err != nil {
			return nil, err
		}
		f.disk = disk
	}
	return f, nil
}

// Fetch returns the content a pinned link points to: oci://host/repo@sha256:…
// or an http(s) URL ending in #sha256=<hex>. The content is verified against
// the digest, so what Fetch returns is exactly what was pinned. Unpinned links
// are refused: they are pinned once, with Pin, when the Manifest is made.
//
// The caller owns the returned slice.
func (f *Fetcher) Fetch(ctx context.Context, rawLink string) ([]byte, error) {
	l, err := f.parseAllowed(rawLink)
	if err != nil {
		return nil, err
	}
	if l.digest == "" {
		return nil, fmt.Errorf("link %q is not pinned by digest (oci://…@sha256:… or #sha256=…); links are pinned when the Manifest is made", l)
	}
	if err := f.verifySignature(ctx, l); err != nil {
		return nil, err
	}
	if data, ok := f.cached(ctx, l.digest); ok {
		return bytes.Clone(data), nil
	}
	// One download per link at a time. Links of other sources that pin the
	// same digest share its content through the cache once it is verified,
	// never a download in flight: its failure (too large, unreachable) is
	// that source's, and a module reading from another must be told its own.
	flight := f.flights.DoChan("pinned "+l.raw, func() (any, error) {
		return f.downloadPinned(ctx, l)
	})
	v, err := f.wait(ctx, l, flight)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(v.([]byte)), nil
}

// Pin returns res with its link pinned by digest, as a Manifest must carry
// it: an oci:// tag is resolved to the digest of the artifact's layer named
// res.Name, and an http(s) URL is fetched and gets #sha256=<digest of the
// body> (its content is then cached for the Fetch that follows). A link
// pinned already is returned unchanged, without any request.
func (f *Fetcher) Pin(ctx context.Context, res v1beta2.ContentResource) (v1beta2.ContentResource, error) {
	l, err := parseLink(res.Link)
	if err != nil {
		return res, err
	}
	if l.digest != "" {
		// Fetch checks the host when the content is read, so that a
		// refused link fails its Manifest, like any content error.
		return res, nil
	}
	if err := f.policy.permits(l.host); err != nil {
		return res, fmt.Errorf("link %s: %w", l, err)
	}
	if l.oci {
		ctx, cancel := context.WithTimeout(ctx, f.cfg.timeout)
		defer cancel()
		pinned, err := ociartifact.ResolveTag(ctx, l.raw, res.Name, f.ociOptions(l.host)...)
		if err != nil {
			return res, withCredentialsHint(err)
		}
		res.Link = pinned
		return res, nil
	}
	flight := f.flights.DoChan("url "+l.url, func() (any, error) {
		data, err := f.download(ctx, l)
		if err != nil {
			return nil, err
		}
		digest := digestOf(data)
		f.store(ctx, digest, data)
		return digest, nil
	})
	v, err := f.wait(ctx, l, flight)
	if err != nil {
		return res, err
	}
	res.Link = pinnedHTTPLink(l, v.(string))
	return res, nil
}

// LinkHost returns the host (host or host:port, lower-cased) the Fetcher
// reads a link from, or why it refuses the link: the link does not read
// one way only, or its host is not allowed. It makes no request, so the
// addresses the host resolves to are not checked. The admission policy of
// config/admission must judge every link alike, and the differential test
// of test/content holds it to this.
func (f *Fetcher) LinkHost(rawLink string) (string, error) {
	l, err := f.parseAllowed(rawLink)
	if err != nil {
		return "", err
	}
	return l.host, nil
}

// parseAllowed parses a link and refuses it when its host is not allowed,
// before any request is made.
func (f *Fetcher) parseAllowed(rawLink string) (link, error) {
	l, err := parseLink(rawLink)
	if err != nil {
		return link{}, err
	}
	if err := f.policy.permits(l.host); err != nil {
		return link{}, fmt.Errorf("link %s: %w", l, err)
	}
	return l, nil
}

// wait waits for a download shared with other callers, or until the
// caller's own context ends; the download goes on for the others.
func (f *Fetcher) wait(ctx context.Context, l link, flight <-chan singleflight.Result) (any, error) {
	if f.joined != nil {
		f.joined()
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("fetching %s: %w", l, ctx.Err())
	case r := <-flight:
		return r.Val, r.Err
	}
}

// downloadPinned downloads the content of a pinned link, verifies it and
// caches it. It looks in the cache once more first: another flight may have
// filled it since the caller looked.
func (f *Fetcher) downloadPinned(ctx context.Context, l link) ([]byte, error) {
	if data, ok := f.cached(ctx, l.digest); ok {
		return data, nil
	}
	data, err := f.download(ctx, l)
	if err != nil {
		return nil, err
	}
	if got := digestOf(data); got != l.digest {
		return nil, fmt.Errorf("content of %s has digest %s, but the link pins %s", l, got, l.digest)
	}
	f.store(ctx, l.digest, data)
	return data, nil
}

// download reads a link's content, bounded by the configured timeout. The
// download is shared by every caller waiting on it, so it does not stop when
// the context of the caller that started it ends; it keeps that context's
// values (the logger).
func (f *Fetcher) download(ctx context.Context, l link) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.timeout)
	defer cancel()
	if l.oci {
		data, err := ociartifact.FetchLayer(ctx, l.raw, f.ociOptions(l.host)...)
		return data, withCredentialsHint(err)
	}
	return f.getHTTP(ctx, l)
}

// verifySignature checks the signature of content from a host that
// requires one, before the content is downloaded or taken from the cache.
func (f *Fetcher) verifySignature(ctx context.Context, l link) error {
	if !f.cfg.signatures.Requires(l.host) {
		return nil
	}
	if !l.oci {
		return &signing.Error{Repository: l.host, Digest: l.digest, Err: signing.ErrUnsigned,
			Detail: "the host requires signed content, and an http(s) link cannot carry a signature: publish the content as a signed OCI artifact"}
	}
	opts := f.ociOptions(l.host)
	nameOpts, _ := ociartifact.Remote(ctx, opts...)
	layer, err := ociartifact.ParseLink(l.raw, nameOpts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.timeout)
	defer cancel()
	return withCredentialsHint(f.cfg.signatures.VerifyLayer(ctx, l.host, layer, opts...))
}

func (f *Fetcher) ociOptions(host string) []ociartifact.Option {
	opts := []ociartifact.Option{
		ociartifact.WithTransport(f.registry),
		ociartifact.WithMaxBytes(f.cfg.maxBytes),
		ociartifact.WithReserve(f.budget.reserve),
	}
	if isInsecure(f.cfg.insecureHosts, host) {
		opts = append(opts, ociartifact.Insecure())
	}
	if f.cfg.keychain != nil {
		opts = append(opts, ociartifact.WithKeychain(f.cfg.keychain))
	}
	return opts
}

// cached looks in memory, then on disk. A disk cache that cannot be read is
// only logged: the content can still be downloaded.
func (f *Fetcher) cached(ctx context.Context, digest string) ([]byte, bool) {
	if f.memory != nil {
		if data, ok := f.memory.get(digest); ok {
			return data, true
		}
	}
	if f.disk == nil {
		return nil, false
	}
	data, ok, err := f.disk.get(digest)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Reading the content cache failed", "digest", digest)
		return nil, false
	}
	if ok && f.memory != nil {
		f.memory.add(digest, data)
	}
	return data, ok
}

// store caches verified content. A disk cache that cannot be written is
// only logged: the content is still good.
func (f *Fetcher) store(ctx context.Context, digest string, data []byte) {
	if f.memory != nil {
		f.memory.add(digest, data)
	}
	if f.disk != nil {
		if err := f.disk.put(digest, data); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Writing the content cache failed", "digest", digest)
		}
	}
}

// withCredentialsHint says where registry credentials come from when a
// registry asks for them: the registry cannot know, the operator's SRE must.
func withCredentialsHint(err error) error {
	var rerr *ociartifact.RegistryError
	if errors.As(err, &rerr) && rerr.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("%w; the registry needs credentials: give the operator a --registry-credentials-secret that holds them for this host", err)
	}
	return err
}

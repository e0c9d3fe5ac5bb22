package signing

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/sync/singleflight"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// maxRemembered bounds each of Policy's memories; when one is full it
// starts again empty (a fleet uses far fewer digests at once).
const maxRemembered = 4096

// Policy says which registries require signed content and with which keys,
// and remembers what it verified: a layer is verified once per process,
// so the periodic reconciles of a fleet cost no registry request. Failures
// are not remembered: a signature pushed later is found at the next try.
// It is safe for concurrent use; concurrent checks of one layer share one.
type Policy struct {
	keys map[string][]signature.Verifier // by lower-case host or host:port

	mu        sync.Mutex
	verified  map[string]bool // host/repo@sha256:… of verified layers
	manifests *ManifestCache
	flights   singleflight.Group
}

// NewPolicy requires signatures for content from each host of keys (host
// or host:port, as links name them; a host alone covers all its ports),
// made with one of the host's keys.
func NewPolicy(keys map[string][]signature.Verifier) *Policy {
	p := &Policy{keys: map[string][]signature.Verifier{}, verified: map[string]bool{}, manifests: &ManifestCache{}}
	for host, k := range keys {
		host = strings.ToLower(strings.TrimSpace(host))
		p.keys[host] = append(p.keys[host], k...)
	}
	return p
}

// LoadPolicy reads each host's public key files (PEM, as cosign.pub).
func LoadPolicy(keyFiles map[string][]string) (*Policy, error) {
	keys := map[string][]signature.Verifier{}
	for _, host := range slices.Sorted(maps.Keys(keyFiles)) {
		for _, file := range keyFiles[host] {
			v, err := LoadVerifierFile(file)
			if err != nil {
				return nil, fmt.Errorf("signatures required for %s: %w", host, err)
			}
			keys[host] = append(keys[host], v)
		}
	}
	return NewPolicy(keys), nil
}

// ParseRequirement parses HOST=PUBKEYFILE, the form of the operator's
// --require-signatures flag.
func ParseRequirement(s string) (host, keyFile string, err error) {
	host, keyFile, ok := strings.Cut(strings.TrimSpace(s), "=")
	host, keyFile = strings.TrimSpace(host), strings.TrimSpace(keyFile)
	if !ok || host == "" || keyFile == "" || strings.ContainsAny(host, "/@ ") {
		return "", "", fmt.Errorf("%q: want HOST=PUBKEYFILE, e.g. registry.example.com=/etc/lifecycle-manager/signing/cosign.pub", s)
	}
	return host, keyFile, nil
}

// Requires reports whether content from host (host or host:port) must be
// signed.
func (p *Policy) Requires(host string) bool {
	return p != nil && p.keysFor(host) != nil
}

// Hosts are the hosts that require signatures, sorted.
func (p *Policy) Hosts() []string {
	if p == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(p.keys))
}

func (p *Policy) keysFor(host string) []signature.Verifier {
	host = strings.ToLower(host)
	if k, ok := p.keys[host]; ok {
		return k
	}
	if h, _, hasPort := strings.Cut(host, ":"); hasPort {
		return p.keys[h]
	}
	return nil
}

// VerifyLayer checks a layer of a host that requires signatures, as
// VerifyLayer does, once: a verified layer is remembered. host is the
// link's host, which selects the keys. A layer of a host that requires
// none passes.
func (p *Policy) VerifyLayer(ctx context.Context, host string, layer name.Digest, opts ...ociartifact.Option) error {
	keys := p.keysFor(host)
	if keys == nil {
		return nil
	}
	key := layer.String()
	p.mu.Lock()
	done := p.verified[key]
	p.mu.Unlock()
	if done {
		return nil
	}
	_, err, _ := p.flights.Do(key, func() (any, error) {
		if err := VerifyLayer(ctx, layer, keys, p.manifests, opts...); err != nil {
			return nil, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.verified) >= maxRemembered {
			p.verified = map[string]bool{}
		}
		p.verified[key] = true
		return nil, nil
	})
	return err
}

// ManifestCache remembers the layers of artifacts by digest. The zero
// value is ready; a nil one remembers nothing.
type ManifestCache struct {
	mu     sync.Mutex
	layers map[string]map[string]bool
}

func (c *ManifestCache) get(artifact string) (map[string]bool, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.layers[artifact]
	return l, ok
}

func (c *ManifestCache) add(artifact string, layers map[string]bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.layers == nil || len(c.layers) >= maxRemembered {
		c.layers = map[string]map[string]bool{}
	}
	c.layers[artifact] = layers
}

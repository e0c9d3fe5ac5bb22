package fetch

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// DefaultMemoryCacheSize bounds the in-memory cache unless
// WithMemoryCacheSize says otherwise. Module content is small (manifests and
// charts of kilobytes to a few megabytes), so this holds every version a
// fleet rolls out at once.
const DefaultMemoryCacheSize int64 = 256 << 20

// DefaultTimeout bounds one download (or tag resolution) unless WithTimeout
// says otherwise, so that a registry or web server that stops answering
// cannot hold a reconcile forever.
const DefaultTimeout = 2 * time.Minute

// DefaultMaxBytes bounds one layer or body unless WithMaxBytes says
// otherwise. Real module manifests are up to about 0.5 MB and charts a few
// MB; a link to something else (a disk image, an endless stream) must not
// exhaust the operator's memory.
const DefaultMaxBytes int64 = 32 << 20

// DefaultInFlightBytes bounds the bytes of all downloads in flight together
// unless WithInFlightBytes says otherwise: four downloads at the cap, or
// many of real module size.
const DefaultInFlightBytes int64 = 128 << 20

// Option configures a Fetcher.
type Option func(*config)

type config struct {
	insecureHosts   map[string]bool
	keychain        authn.Keychain
	transport       http.RoundTripper
	memoryCacheSize int64
	diskCacheDir    string
	timeout         time.Duration
	maxBytes        int64
	inFlightBytes   int64
	allowedHosts    []string
	signatures      *signing.Policy
}

func newConfig(opts []Option) config {
	c := config{
		insecureHosts:   map[string]bool{},
		memoryCacheSize: DefaultMemoryCacheSize,
		timeout:         DefaultTimeout,
		maxBytes:        DefaultMaxBytes,
		inFlightBytes:   DefaultInFlightBytes,
	}
	for _, opt := range opts {
		opt(&c)
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxBytes
	}
	if c.inFlightBytes <= 0 {
		c.inFlightBytes = DefaultInFlightBytes
	}
	return c
}

// WithInsecureRegistries reaches the given registry hosts (host:port as in
// the links, or a host alone for all its ports) over plain HTTP, as local
// and test registries on loopback are served. Every other registry is
// reached over HTTPS, whatever its address. The hosts count as allowed
// content hosts (WithAllowedHosts), on any address. Flags are read with
// ParseRegistryHost, which refuses what this skips.
func WithInsecureRegistries(hosts ...string) Option {
	return func(c *config) {
		for _, h := range hosts {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				// An IPv6 address alone is looked up without brackets,
				// as hostName gives it.
				c.insecureHosts[withoutBrackets(h)] = true
			}
		}
	}
}

// ParseRegistryHost reads a registry host as an SRE lists it
// (--insecure-registries): host:port or a host alone, written as links
// write it (parseLink), so that it can match one; surrounding spaces are
// dropped and the host is lower-cased.
func ParseRegistryHost(entry string) (string, error) {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return "", errors.New("empty registry host")
	}
	u, err := url.Parse("//" + entry)
	if err != nil || u.Host != entry {
		return "", fmt.Errorf("registry host %q: want host or host:port, without scheme, path or user info", entry)
	}
	host, err := checkHost(u)
	if err != nil {
		return "", fmt.Errorf("registry %w", err)
	}
	return host, nil
}

// WithKeychain authenticates to registries with the given credentials,
// e.g. a SecretKeychain of the operator's dockerconfigjson Secret.
// Without it registries are read anonymously.
func WithKeychain(k authn.Keychain) Option {
	return func(c *config) { c.keychain = k }
}

// WithTransport sends every request, to registries and web servers alike,
// through the given transport, e.g. one that trusts a private CA. The host
// allow-list, redirect rules and size caps still apply; the check of the
// dialled address does not, as the given transport dials.
func WithTransport(t http.RoundTripper) Option {
	return func(c *config) { c.transport = t }
}

// WithMemoryCacheSize bounds the in-memory cache to the given number of
// bytes; 0 or less turns it off.
func WithMemoryCacheSize(bytes int64) Option {
	return func(c *config) { c.memoryCacheSize = bytes }
}

// WithDiskCache also keeps fetched content in dir, so that a restarted
// operator does not download the fleet's content again. The directory is
// created if needed; nothing in it is ever evicted, so give it a volume sized
// for the module versions in use.
func WithDiskCache(dir string) Option {
	return func(c *config) { c.diskCacheDir = dir }
}

// WithTimeout bounds each download and tag resolution.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithMaxBytes bounds each layer and body: one that declares more is
// refused before it is downloaded, and one that sends more is refused while
// it streams. 0 or less keeps DefaultMaxBytes.
func WithMaxBytes(n int64) Option {
	return func(c *config) { c.maxBytes = n }
}

// WithInFlightBytes bounds the bytes of all downloads in flight together
// (raised to the per-download cap if lower). 0 or less keeps
// DefaultInFlightBytes.
func WithInFlightBytes(n int64) Option {
	return func(c *config) { c.inFlightBytes = n }
}

// WithAllowedHosts limits content to the given hosts and registries:
// host:port, host (any port) or *.example.com (its subdomains). Without it
// any host is allowed whose addresses are public. Either way a host that
// resolves to a loopback, link-local (cloud metadata) or private address is
// refused unless it is listed here or among the insecure registries.
func WithAllowedHosts(hosts ...string) Option {
	return func(c *config) {
		for _, h := range hosts {
			if h = strings.TrimSpace(h); h != "" {
				c.allowedHosts = append(c.allowedHosts, h)
			}
		}
	}
}

// WithSignatures refuses content from the hosts the policy names unless it
// is a layer of an OCI artifact signed with one of the host's keys
// (cosign's format, internal/signing). http(s) links to such a host are
// refused: they cannot carry a signature. A layer is verified once; its
// later fetches, from the cache or not, cost nothing more.
func WithSignatures(p *signing.Policy) Option {
	return func(c *config) { c.signatures = p }
}

package fetch

import (
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
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

// maxHTTPBody bounds what an http(s) link may return, so that a link to
// something that is not module content cannot exhaust the operator's memory.
const maxHTTPBody = 128 << 20

// Option configures a Fetcher.
type Option func(*config)

type config struct {
	insecureHosts   map[string]bool
	keychain        authn.Keychain
	transport       http.RoundTripper
	memoryCacheSize int64
	diskCacheDir    string
	timeout         time.Duration
}

func newConfig(opts []Option) config {
	c := config{
		insecureHosts:   map[string]bool{},
		memoryCacheSize: DefaultMemoryCacheSize,
		timeout:         DefaultTimeout,
	}
	for _, opt := range opts {
		opt(&c)
	}
	return c
}

// WithInsecureRegistries reaches the given registry hosts (host:port as in
// the links) over plain HTTP, as local and test registries on loopback are
// served. Every other registry is reached over HTTPS.
func WithInsecureRegistries(hosts ...string) Option {
	return func(c *config) {
		for _, h := range hosts {
			c.insecureHosts[h] = true
		}
	}
}

// WithKeychain authenticates to registries with the given credentials,
// e.g. a SecretKeychain of the operator's dockerconfigjson Secret.
// Without it registries are read anonymously.
func WithKeychain(k authn.Keychain) Option {
	return func(c *config) { c.keychain = k }
}

// WithTransport sends every request, to registries and web servers alike,
// through the given transport, e.g. one that trusts a private CA.
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

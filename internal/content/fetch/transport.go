package fetch

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// maxRedirects bounds a chain of redirects, as net/http's default does.
const maxRedirects = 10

// newDialingTransport is the transport the Fetcher uses unless WithTransport
// gives one: it connects directly (no proxy from the environment: the
// address checked must be the address reached) and refuses non-public
// addresses of hosts the SRE did not list.
func newDialingTransport(policy hostPolicy) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxResponseHeaderBytes = 1 << 20
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	guarded := &net.Dialer{Timeout: dialer.Timeout, KeepAlive: dialer.KeepAlive, Control: refuseNonPublic}
	t.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		if policy.listed(address) {
			return dialer.DialContext(ctx, network, address)
		}
		return guarded.DialContext(ctx, network, address)
	}
	return t
}

// guard checks every request the Fetcher sends, redirects included, and
// bounds every response body. Registry clients (go-containerregistry) make
// their own requests and follow redirects themselves, so the checks live
// here rather than in one http.Client.
type guard struct {
	next     http.RoundTripper
	policy   hostPolicy
	maxBytes int64
	// registry is true for the transport handed to the registry client:
	// plain HTTP is then used only for the insecure registries.
	registry bool
}

// RoundTrip implements http.RoundTripper.
func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.policy.permits(req.URL.Host); err != nil {
		return nil, err
	}
	if req.Response != nil && req.Response.Request != nil {
		if err := g.checkRedirect(req.Response.Request.URL, req.URL); err != nil {
			return nil, err
		}
	}
	if g.registry && req.URL.Scheme == "http" && !isInsecure(g.policy.insecure, req.URL.Host) {
		// go-containerregistry reaches loopback and RFC 1918 registries
		// over plain HTTP on its own; only the SRE may decide that.
		req = req.Clone(req.Context())
		req.URL.Scheme = "https"
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: g.maxBytes, limit: g.maxBytes}
	return resp, nil
}

// checkRedirect refuses a redirect that downgrades https to http, and one
// to another host. Registries are the exception for hosts: they commonly
// serve blobs from a storage host by redirect (and the content is verified
// against its digest), so a registry may redirect to a host that the
// allow-list names explicitly.
func (g *guard) checkRedirect(from, to *url.URL) error {
	if from.Scheme == "https" && to.Scheme != "https" {
		return fmt.Errorf("redirect from %s to %s is refused: it leaves https", redactURL(from), redactURL(to))
	}
	if strings.EqualFold(from.Host, to.Host) {
		return nil
	}
	if g.registry && len(g.policy.allowed) > 0 && g.policy.listed(to.Host) {
		return nil
	}
	return fmt.Errorf("redirect from %s to another host, %s, is refused", redactURL(from), to.Host)
}

// checkHTTPRedirect is the http.Client CheckRedirect for http(s) links; it
// stops a chain early with a clear error (the guard would refuse it too).
func (g *guard) checkHTTPRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return g.checkRedirect(via[len(via)-1].URL, req.URL)
}

// cappedBody fails a read once more than the limit has come, whatever the
// response declared: a server or registry may lie about sizes.
type cappedBody struct {
	io.ReadCloser
	left, limit int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), fmt.Errorf("%w: the response goes on past %d bytes (--content-max-bytes)", ociartifact.ErrTooLarge, b.limit)
	}
	return n, err
}

// redactURL is a URL as it may appear in errors: without user info, query
// or fragment, which may carry credentials.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}

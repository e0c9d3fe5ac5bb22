package fetch_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// marker stands for whatever a server puts in an error body: it must never
// reach an error.
const marker = "MARKER-from-the-response-body"

// countingServer serves content and counts the requests that reach it.
func countingServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		handler(w, r)
	}))
	t.Cleanup(server.Close)
	return server, &hits
}

func hostOf(server *httptest.Server) string {
	return strings.TrimPrefix(strings.TrimPrefix(server.URL, "http://"), "https://")
}

func TestLinksReachOnlyAllowedPublicHosts(t *testing.T) {
	content := []byte("kind: ConfigMap\n")
	server, hits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(content) })
	_, port, _ := strings.Cut(hostOf(server), ":")
	pin := "#sha256=" + pinOf(content)

	tests := []struct {
		name string
		link string
		opts []fetch.Option
		want string
	}{
		{name: "loopback not listed", link: server.URL + "/m.yaml" + pin, want: "127.0.0.1 is a loopback address"},
		{name: "a name that resolves to loopback", link: "http://localhost:" + port + "/m.yaml" + pin, want: "is a loopback address"},
		{name: "cloud metadata", link: "http://169.254.169.254/latest/meta-data/" + pin, want: "169.254.169.254 is a link-local (cloud metadata) address"},
		{name: "private network", link: "http://10.1.2.3:8080/m.yaml" + pin, want: "10.1.2.3 is a private address"},
		{name: "private registry", link: "oci://10.1.2.3:5000/modules/a@sha256:" + strings.Repeat("ab", 32), want: "10.1.2.3 is a private address"},
		{name: "host outside the allow-list", link: server.URL + "/m.yaml" + pin,
			opts: []fetch.Option{fetch.WithAllowedHosts("registry.example.com")},
			want: "host " + hostOf(server) + " is not an allowed content host; the operator's --content-allowed-hosts lists registry.example.com"},
		{name: "listed host on another port", link: server.URL + "/m.yaml" + pin,
			opts: []fetch.Option{fetch.WithAllowedHosts("127.0.0.1:1")}, want: "not an allowed content host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f, err := fetch.New(append(tt.opts, fetch.WithTimeout(5*time.Second))...)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = f.Fetch(context.Background(), tt.link)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(hits.Load()).To(BeZero(), "no request reached the server")
		})
	}

	t.Run("listed hosts are reached", func(t *testing.T) {
		for _, allowed := range []string{hostOf(server), "127.0.0.1", "localhost"} {
			g := NewWithT(t)
			f, err := fetch.New(fetch.WithAllowedHosts(allowed))
			g.Expect(err).NotTo(HaveOccurred())
			link := server.URL + "/m.yaml" + pin
			if allowed == "localhost" {
				link = "http://localhost:" + port + "/m.yaml" + pin
			}
			got, err := f.Fetch(context.Background(), link)
			g.Expect(err).NotTo(HaveOccurred(), allowed)
			g.Expect(got).To(Equal(content))
		}
	})
}

func TestRedirectsStayOnHostAndHTTPS(t *testing.T) {
	content := []byte("kind: ConfigMap\n")
	pin := "#sha256=" + pinOf(content)
	elsewhere, elsewhereHits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(content) })
	same, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/m.yaml", http.StatusFound)
			return
		}
		_, _ = w.Write(content)
	})
	redirecting, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/m.yaml", http.StatusFound)
	})
	tlsRedirecting := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+hostOf(elsewhere)+"/m.yaml", http.StatusMovedPermanently)
	}))
	t.Cleanup(tlsRedirecting.Close)
	allowAll := fetch.WithAllowedHosts(hostOf(elsewhere), hostOf(same), hostOf(redirecting), hostOf(tlsRedirecting))

	t.Run("same host", func(t *testing.T) {
		g := NewWithT(t)
		f, err := fetch.New(allowAll)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := f.Fetch(context.Background(), same.URL+"/moved"+pin)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(content))
	})
	t.Run("to another host", func(t *testing.T) {
		g := NewWithT(t)
		f, err := fetch.New(allowAll)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = f.Fetch(context.Background(), redirecting.URL+"/m.yaml"+pin)
		g.Expect(err).To(MatchError(ContainSubstring("to another host, " + hostOf(elsewhere) + ", is refused")))
		g.Expect(elsewhereHits.Load()).To(BeZero())
	})
	t.Run("from https to http", func(t *testing.T) {
		g := NewWithT(t)
		f, err := fetch.New(allowAll, fetch.WithTransport(tlsRedirecting.Client().Transport))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = f.Fetch(context.Background(), tlsRedirecting.URL+"/m.yaml"+pin)
		g.Expect(err).To(MatchError(ContainSubstring("it leaves https")))
		g.Expect(elsewhereHits.Load()).To(BeZero())
	})
}

func TestErrorsCarryNoResponseBodies(t *testing.T) {
	g := NewWithT(t)
	server, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"errors":[{"code":"UNKNOWN","message":"` + marker + `"}]}`))
	})
	f, err := fetch.New(allow(server))
	g.Expect(err).NotTo(HaveOccurred())

	_, err = f.Fetch(context.Background(), server.URL+"/m.yaml#sha256="+strings.Repeat("0", 64))
	g.Expect(err).To(MatchError(ContainSubstring("server answered 500 Internal Server Error")))
	g.Expect(err.Error()).NotTo(ContainSubstring(marker))

	// A registry's structured error and raw body both stay out.
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"errors":[{"code":"DENIED","message":"` + marker + `","detail":"` + marker + `"}]}`))
	}))
	t.Cleanup(reg.Close)
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("<html>" + marker + "</html>"))
	}))
	t.Cleanup(raw.Close)
	f, err = fetch.New(fetch.WithInsecureRegistries(hostOf(reg), hostOf(raw)))
	g.Expect(err).NotTo(HaveOccurred())
	for _, host := range []string{hostOf(reg), hostOf(raw)} {
		_, err = f.Fetch(context.Background(), "oci://"+host+"/modules/a@sha256:"+strings.Repeat("ab", 32))
		g.Expect(err).To(MatchError(ContainSubstring("registry answered 403 Forbidden")))
		g.Expect(err.Error()).NotTo(ContainSubstring(marker))
	}
	g.Expect(err.Error()).NotTo(ContainSubstring("DENIED"), "the raw body has no codes")
}

func TestRegistryOnAPrivateAddressGetsNoPlainHTTP(t *testing.T) {
	g := NewWithT(t)
	p := pushModule(t)
	var plain atomic.Int32
	// go-containerregistry would reach 127.0.0.1 over plain HTTP on its
	// own; listed as allowed but not as insecure, it must get https.
	f, err := fetch.New(fetch.WithAllowedHosts(p.reg.Host()), fetch.WithTimeout(5*time.Second),
		fetch.WithTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Scheme == "http" {
				plain.Add(1)
			}
			return http.DefaultTransport.RoundTrip(req)
		})))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Fetch(context.Background(), p.links["rawManifest"])
	g.Expect(err).To(HaveOccurred(), "the registry speaks only plain HTTP")
	g.Expect(plain.Load()).To(BeZero())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestSizeCaps(t *testing.T) {
	const maxBytes = 64 << 10
	big := bytes.Repeat([]byte("x"), 4*maxBytes)
	small := []byte("kind: ConfigMap\n")
	server, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/declared":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			_, _ = w.Write(big)
		case "/chunked":
			for range 8 {
				_, _ = w.Write(big[:maxBytes/2])
				w.(http.Flusher).Flush()
			}
		default:
			_, _ = w.Write(small)
		}
	})
	f, err := fetch.New(allow(server), fetch.WithMaxBytes(maxBytes))
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = f.Fetch(context.Background(), server.URL+"/declared#sha256="+pinOf(big))
	g.Expect(err).To(MatchError(ContainSubstring("the server declares 262144 bytes, the limit is 65536 (--content-max-bytes)")))
	g.Expect(err).To(MatchError(ociartifact.ErrTooLarge))
	_, err = f.Fetch(context.Background(), server.URL+"/chunked#sha256="+pinOf(big))
	g.Expect(err).To(MatchError(ContainSubstring("goes on past 65536 bytes (--content-max-bytes)")))
	got, err := f.Fetch(context.Background(), server.URL+"/small#sha256="+pinOf(small))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(small))

	// An OCI layer above the cap is refused on its declared size: by its
	// descriptor in the artifact when a tag is pinned, by the registry's
	// answer to HEAD when a digest is fetched.
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	artifact, err := ociartifact.Push(context.Background(), reg.Host()+"/modules/big:1.0.0",
		ociartifact.Module{RawManifest: big}.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	f, err = fetch.New(fetch.WithInsecureRegistries(reg.Host()), fetch.WithMaxBytes(maxBytes))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Fetch(context.Background(), artifact.Links["rawManifest"])
	g.Expect(err).To(MatchError(ContainSubstring("the registry declares 262144 bytes, the limit is 65536")))
	_, err = f.Pin(context.Background(), v1beta2.ContentResource{Name: "rawManifest", Link: "oci://" + reg.Host() + "/modules/big:1.0.0"})
	g.Expect(err).To(MatchError(ContainSubstring(`layer "rawManifest": content is larger than the size limit: its descriptor declares 262144 bytes, the limit is 65536`)))
}

func TestInFlightBudgetHoldsDownloadsBack(t *testing.T) {
	g := NewWithT(t)
	const maxBytes = 64 << 10
	gate := make(chan struct{})
	// Both answer without a length, so each download reserves the cap,
	// which is the whole budget: one of them must wait for the other.
	server, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-gate
		_, _ = w.Write([]byte(r.URL.Path))
	})
	f, err := fetch.New(allow(server), fetch.WithMaxBytes(maxBytes), fetch.WithInFlightBytes(maxBytes))
	g.Expect(err).NotTo(HaveOccurred())
	var waited atomic.Int32
	fetch.SetBudgetWaitHook(f, func() { waited.Add(1) })

	results := make(chan error, 2)
	for _, path := range []string{"/a", "/b"} {
		go func() {
			_, err := f.Fetch(context.Background(), server.URL+path+"#sha256="+pinOf([]byte(path)))
			results <- err
		}()
	}
	g.Eventually(waited.Load).Should(Equal(int32(1)), "the second download waits for the budget")
	close(gate)
	for range 2 {
		g.Eventually(results).Should(Receive(BeNil()))
	}
	g.Expect(waited.Load()).To(Equal(int32(1)))
}

// newLyingRegistry serves a registry that declares (HEAD) a blob smaller
// than what it then streams (GET, without a length).
func newLyingRegistry(t *testing.T) *httptest.Server {
	t.Helper()
	handler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			w.WriteHeader(http.StatusOK)
			for range 64 {
				if _, err := w.Write(bytes.Repeat([]byte("y"), 16<<10)); err != nil {
					return
				}
			}
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	return server
}

func TestRegistryThatSendsMoreThanItDeclaresIsCut(t *testing.T) {
	g := NewWithT(t)
	reg := newLyingRegistry(t)
	artifact, err := ociartifact.Push(context.Background(), hostOf(reg)+"/modules/lying:1.0.0",
		ociartifact.Module{RawManifest: []byte("kind: ConfigMap\n")}.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	f, err := fetch.New(fetch.WithInsecureRegistries(hostOf(reg)))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Fetch(context.Background(), artifact.Links["rawManifest"])
	g.Expect(err).To(MatchError(ContainSubstring("the registry declared 16 bytes and sends more")))
}

package fetch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// countingTransport counts the requests that reach a registry or server, and
// can hold blob downloads (GETs; a HEAD reads the declared size first) until
// a gate opens.
type countingTransport struct {
	total atomic.Int32
	blobs atomic.Int32
	gate  chan struct{} // nil: never hold
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.total.Add(1)
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
		c.blobs.Add(1)
		if c.gate != nil {
			<-c.gate
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// pushed is a module pushed to a fresh registry.
type pushed struct {
	reg   *testregistry.Registry
	links map[string]string
	data  map[string][]byte
}

func pushModule(t *testing.T) pushed {
	t.Helper()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	module := ociartifact.Module{
		RawManifest: []byte(strings.Repeat("# raw manifest\n", 64)),
		CRDs:        []byte(strings.Repeat("# crds\n", 128)),
		DefaultCR:   []byte(strings.Repeat("# default cr\n", 80)),
	}
	artifact, err := ociartifact.Push(context.Background(), reg.Host()+"/modules/sample:1.0.0", module.Layers(), ociartifact.Insecure())
	if err != nil {
		t.Fatalf("pushing module: %v", err)
	}
	data := map[string][]byte{}
	for _, l := range module.Layers() {
		data[l.Name] = l.Data
	}
	return pushed{reg: reg, links: artifact.Links, data: data}
}

func newFetcher(t *testing.T, p pushed, opts ...fetch.Option) *fetch.Fetcher {
	t.Helper()
	f, err := fetch.New(append([]fetch.Option{fetch.WithInsecureRegistries(p.reg.Host())}, opts...)...)
	if err != nil {
		t.Fatalf("creating fetcher: %v", err)
	}
	return f
}

// allow lists a test server, which listens on loopback, as a content host.
func allow(server *httptest.Server) fetch.Option {
	return fetch.WithAllowedHosts(strings.TrimPrefix(server.URL, "http://"))
}

func pinOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func TestFetchByDigest(t *testing.T) {
	g := NewWithT(t)
	p := pushModule(t)
	f := newFetcher(t, p)

	for name, link := range p.links {
		got, err := f.Fetch(context.Background(), link)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(got).To(Equal(p.data[name]), name)
	}
}

func TestFetchReturnsACopy(t *testing.T) {
	g := NewWithT(t)
	p := pushModule(t)
	f := newFetcher(t, p)

	first, err := f.Fetch(context.Background(), p.links[v1beta2.RawManifestResourceName])
	g.Expect(err).NotTo(HaveOccurred())
	first[0] = 'X'
	second, err := f.Fetch(context.Background(), p.links[v1beta2.RawManifestResourceName])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).To(Equal(p.data[v1beta2.RawManifestResourceName]), "a caller's change must not reach the cache")
}

func TestConcurrentFetchesOfOneDigestShareOneDownload(t *testing.T) {
	const callers = 20
	g := NewWithT(t)
	p := pushModule(t)
	transport := &countingTransport{gate: make(chan struct{})}
	f := newFetcher(t, p, fetch.WithTransport(transport))

	// Hold the download until every caller waits on it, so that none of them
	// can be served from the cache instead.
	var joined sync.WaitGroup
	joined.Add(callers)
	fetch.SetJoinedHook(f, joined.Done)
	go func() {
		joined.Wait()
		close(transport.gate)
	}()

	link := p.links[v1beta2.CRDsResourceName]
	results := make([][]byte, callers)
	errs := make([]error, callers)
	var done sync.WaitGroup
	for i := range callers {
		done.Go(func() { results[i], errs[i] = f.Fetch(context.Background(), link) })
	}
	done.Wait()

	for i := range callers {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(results[i]).To(Equal(p.data[v1beta2.CRDsResourceName]))
	}
	g.Expect(transport.blobs.Load()).To(Equal(int32(1)), "one download for all callers")

	// And no more requests of any kind (ping, token) than one lone fetch makes.
	lone := &countingTransport{}
	_, err := newFetcher(t, p, fetch.WithTransport(lone)).Fetch(context.Background(), link)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(transport.total.Load()).To(Equal(lone.total.Load()))
}

func TestMemoryCacheServesRepeatsAndEvictsLeastRecentlyUsed(t *testing.T) {
	g := NewWithT(t)
	p := pushModule(t)
	transport := &countingTransport{}
	raw, crds, cr := v1beta2.RawManifestResourceName, v1beta2.CRDsResourceName, ociartifact.DefaultCRLayerName
	// Room for raw and cr together, not for all three parts.
	bound := int64(len(p.data[raw]) + len(p.data[cr]))
	f := newFetcher(t, p, fetch.WithTransport(transport), fetch.WithMemoryCacheSize(bound))
	fetchPart := func(name string) int32 {
		before := transport.blobs.Load()
		got, err := f.Fetch(context.Background(), p.links[name])
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(got).To(Equal(p.data[name]), name)
		return transport.blobs.Load() - before
	}

	g.Expect(fetchPart(raw)).To(Equal(int32(1)), "first fetch downloads")
	g.Expect(fetchPart(raw)).To(Equal(int32(0)), "repeat comes from memory")
	g.Expect(fetchPart(crds)).To(Equal(int32(1)))
	g.Expect(fetchPart(raw)).To(Equal(int32(0)), "raw is now the most recent")
	g.Expect(fetchPart(cr)).To(Equal(int32(1)), "evicts crds, the least recently used")
	g.Expect(fetchPart(raw)).To(Equal(int32(0)), "raw stayed")
	g.Expect(fetchPart(crds)).To(Equal(int32(1)), "crds was evicted")
}

func TestDiskCacheSurvivesRestart(t *testing.T) {
	g := NewWithT(t)
	p := pushModule(t)
	dir := t.TempDir()
	link := p.links[v1beta2.RawManifestResourceName]

	before := newFetcher(t, p, fetch.WithDiskCache(dir))
	_, err := before.Fetch(context.Background(), link)
	g.Expect(err).NotTo(HaveOccurred())
	p.reg.Close()

	after := newFetcher(t, p, fetch.WithDiskCache(dir))
	got, err := after.Fetch(context.Background(), link)
	g.Expect(err).NotTo(HaveOccurred(), "served from disk with the registry down")
	g.Expect(got).To(Equal(p.data[v1beta2.RawManifestResourceName]))
}

func TestDiskCacheDropsDamagedContent(t *testing.T) {
	g := NewWithT(t)
	p := pushModule(t)
	dir := t.TempDir()
	link := p.links[v1beta2.RawManifestResourceName]
	want := p.data[v1beta2.RawManifestResourceName]

	_, err := newFetcher(t, p, fetch.WithDiskCache(dir)).Fetch(context.Background(), link)
	g.Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(dir, "sha256", pinOf(want))
	g.Expect(os.WriteFile(file, []byte("damaged"), 0o600)).To(Succeed())

	transport := &countingTransport{}
	got, err := newFetcher(t, p, fetch.WithDiskCache(dir), fetch.WithTransport(transport)).Fetch(context.Background(), link)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	g.Expect(transport.blobs.Load()).To(Equal(int32(1)), "damaged content is downloaded again")
	g.Expect(os.ReadFile(file)).To(Equal(want), "and the cache repaired")
}

func TestFetchErrors(t *testing.T) {
	p := pushModule(t)
	content := []byte("apiVersion: v1\nkind: ConfigMap\n")
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/manifest.yaml" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(content)
	}))
	t.Cleanup(server.Close)
	down := testregistry.Start()
	downHost := down.Host()
	down.Close()

	missing := "oci://" + p.reg.Host() + "/modules/sample@sha256:" + strings.Repeat("ab", 32)
	onDown := "oci://" + downHost + "/modules/sample@sha256:" + strings.Repeat("cd", 32)
	wrongPin := server.URL + "/manifest.yaml#sha256=" + strings.Repeat("0", 64)
	tests := []struct {
		name     string
		link     string
		want     []string
		notWant  string
		insecure string
	}{
		{name: "missing layer", link: missing, want: []string{missing}},
		{name: "registry down", link: onDown, want: []string{onDown, "connection refused"}, insecure: downHost},
		{name: "oci tag is not pinned", link: "oci://" + p.reg.Host() + "/modules/sample:1.0.0", want: []string{"not pinned by digest"}},
		{name: "http without pin", link: server.URL + "/manifest.yaml", want: []string{"not pinned by digest"}},
		{name: "http with a wrong pin", link: wrongPin,
			want: []string{"sha256:" + pinOf(content), "sha256:" + strings.Repeat("0", 64), server.URL + "/manifest.yaml"}},
		{name: "http not found", link: server.URL + "/nope#sha256=" + pinOf(content), want: []string{"404", "/nope"}},
		{name: "http password stays out of errors", link: strings.Replace(server.URL, "//", "//user:s3cret@", 1) + "/nope#sha256=" + pinOf(content),
			want: []string{"user:xxxxx@"}, notWant: "s3cret"},
		{name: "unsupported scheme", link: "s3://bucket/manifest.yaml", want: []string{"want oci://"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f, err := fetch.New(fetch.WithInsecureRegistries(p.reg.Host(), tt.insecure), allow(server))
			g.Expect(err).NotTo(HaveOccurred())
			_, err = f.Fetch(context.Background(), tt.link)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			if tt.notWant != "" {
				g.Expect(err.Error()).NotTo(ContainSubstring(tt.notWant))
			}
		})
	}
}

func TestFetchHTTPWithRightPin(t *testing.T) {
	g := NewWithT(t)
	content := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write(content)
	}))
	t.Cleanup(server.Close)
	f, err := fetch.New(allow(server))
	g.Expect(err).NotTo(HaveOccurred())

	link := server.URL + "/manifest.yaml#sha256=" + pinOf(content)
	for range 2 {
		got, err := f.Fetch(context.Background(), link)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(content))
	}
	g.Expect(requests.Load()).To(Equal(int32(1)), "the second fetch comes from the cache")
}

func TestFailedFetchesAreNotCached(t *testing.T) {
	g := NewWithT(t)
	content := []byte("kind: ConfigMap\n")
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if requests.Add(1) == 1 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(content)
	}))
	t.Cleanup(server.Close)
	f, err := fetch.New(allow(server))
	g.Expect(err).NotTo(HaveOccurred())
	link := server.URL + "/m.yaml#sha256=" + pinOf(content)

	_, err = f.Fetch(context.Background(), link)
	g.Expect(err).To(MatchError(ContainSubstring("503")))
	got, err := f.Fetch(context.Background(), link)
	g.Expect(err).NotTo(HaveOccurred(), "the failure was not remembered")
	g.Expect(got).To(Equal(content))
}

func TestFetchHTTPTimesOut(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(server.Close)
	t.Cleanup(func() { close(release) })
	f, err := fetch.New(fetch.WithTimeout(50*time.Millisecond), allow(server))
	g.Expect(err).NotTo(HaveOccurred())

	_, err = f.Fetch(context.Background(), server.URL+"/m.yaml#sha256="+strings.Repeat("0", 64))
	g.Expect(err).To(MatchError(ContainSubstring("deadline exceeded")))
}

func TestPin(t *testing.T) {
	p := pushModule(t)
	content := []byte("apiVersion: v1\nkind: ConfigMap\n")
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(content)
	}))
	t.Cleanup(server.Close)
	pinnedHTTP := server.URL + "/m.yaml#sha256=" + pinOf(content)
	tag := "oci://" + p.reg.Host() + "/modules/sample:1.0.0"

	tests := []struct {
		name    string
		res     v1beta2.ContentResource
		want    string
		wantErr string
	}{
		{name: "oci tag resolves to the named layer",
			res:  v1beta2.ContentResource{Name: v1beta2.CRDsResourceName, Link: tag},
			want: p.links[v1beta2.CRDsResourceName]},
		{name: "oci digest stays",
			res:  v1beta2.ContentResource{Name: v1beta2.RawManifestResourceName, Link: p.links[v1beta2.RawManifestResourceName]},
			want: p.links[v1beta2.RawManifestResourceName]},
		{name: "http gets the digest of its body",
			res:  v1beta2.ContentResource{Name: v1beta2.RawManifestResourceName, Link: server.URL + "/m.yaml"},
			want: pinnedHTTP},
		{name: "pinned http stays",
			res:  v1beta2.ContentResource{Name: v1beta2.RawManifestResourceName, Link: pinnedHTTP},
			want: pinnedHTTP},
		{name: "oci tag without such a layer",
			res:     v1beta2.ContentResource{Name: v1beta2.HelmChartResourceName, Link: tag},
			wantErr: `no layer "helmChart"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFetcher(t, p, allow(server))
			got, err := f.Pin(context.Background(), tt.res)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Name).To(Equal(tt.res.Name))
			g.Expect(got.Link).To(Equal(tt.want))
		})
	}
}

func TestPinnedHTTPContentIsCached(t *testing.T) {
	g := NewWithT(t)
	content := []byte("kind: ConfigMap\n")
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write(content)
	}))
	t.Cleanup(server.Close)
	f, err := fetch.New(allow(server))
	g.Expect(err).NotTo(HaveOccurred())

	pinned, err := f.Pin(context.Background(), v1beta2.ContentResource{Name: "rawManifest", Link: server.URL + "/m.yaml"})
	g.Expect(err).NotTo(HaveOccurred())
	got, err := f.Fetch(context.Background(), pinned.Link)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(content))
	g.Expect(requests.Load()).To(Equal(int32(1)), "Fetch after Pin needs no second download")
}

func TestNewFailsOnUnusableDiskCache(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "file")
	g.Expect(os.WriteFile(file, nil, 0o600)).To(Succeed())
	_, err := fetch.New(fetch.WithDiskCache(file))
	g.Expect(err).To(MatchError(ContainSubstring("content cache directory")))
}

// TestTwoSourcesOfOneDigestFailApart fetches, at the same moment, two links
// of different sources that pin the same digest: one source fails, the
// other serves the content. Each caller is told its own source's result: a
// download in flight is shared by one link only, so one module is never
// handed another's failure (nor its error message, naming the other URL).
func TestTwoSourcesOfOneDigestFailApart(t *testing.T) {
	g := NewWithT(t)
	content := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		select { // both downloads are in flight together, or the test says so below
		case <-both:
		case <-time.After(10 * time.Second):
		}
		if r.URL.Path == "/broken" {
			http.Error(w, "gone", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(content)
	}))
	t.Cleanup(server.Close)
	f, err := fetch.New(allow(server))
	g.Expect(err).NotTo(HaveOccurred())

	pin := "#sha256=" + pinOf(content)
	var good, bad error
	var got []byte
	var done sync.WaitGroup
	done.Go(func() { got, good = f.Fetch(context.Background(), server.URL+"/good"+pin) })
	done.Go(func() { _, bad = f.Fetch(context.Background(), server.URL+"/broken"+pin) })
	done.Wait()
	g.Expect(both).To(BeClosed(), "the second source was never asked: its caller shared the first's download")
	g.Expect(good).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(content))
	g.Expect(bad).To(MatchError(ContainSubstring("/broken")))
}

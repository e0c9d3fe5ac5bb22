package content

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// hugeSize is what the huge layers and bodies are: 1 GiB, produced as it
// is sent and never held.
const hugeSize = 1 << 30

// marker stands for what a registry or server writes into an error body;
// it must never reach a status or an event.
const marker = "MARKER-registry-error-body"

// Digests the content registry treats specially. They are digests of
// nothing in particular: the content is refused before it could be
// verified.
var (
	honestHuge = fakeDigest("honest-huge")
	lyingHuge  = fakeDigest("lying-huge")
	failing    = fakeDigest("failing")
)

func fakeDigest(seed string) v1.Hash {
	sum := sha256.Sum256([]byte(seed))
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// contentRegistry is go-containerregistry's registry (the real
// distribution protocol) over an in-memory store with two layers of 1 GiB
// that are generated while they stream: honestHuge, declared as 1 GiB, and
// lyingHuge, declared (HEAD) as 1 KiB and then streamed without a length.
// failing answers its download with 500 and a body holding the marker.
type contentRegistry struct {
	server *httptest.Server
}

func startContentRegistry() *contentRegistry {
	blobs := &hugeBlobs{memory: registry.NewInMemoryBlobHandler()}
	handler := registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(blobs))
	return &contentRegistry{server: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/blobs/"+lyingHuge.String()) && r.Method == http.MethodHead:
			w.Header().Set("Content-Length", "1024")
			w.Header().Set("Docker-Content-Digest", lyingHuge.String())
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/blobs/"+lyingHuge.String()):
			handler.ServeHTTP(&withoutLength{ResponseWriter: w}, r)
		case strings.HasSuffix(r.URL.Path, "/blobs/"+failing.String()) && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNKNOWN","message":"` + marker + `"}]}` + "\n" + marker))
		case strings.HasSuffix(r.URL.Path, "/blobs/"+failing.String()):
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
		default:
			handler.ServeHTTP(w, r)
		}
	}))}
}

// Host is the registry's host:port.
func (r *contentRegistry) Host() string { return strings.TrimPrefix(r.server.URL, "http://") }

// Link is the oci:// link of a blob in the registry.
func (r *contentRegistry) Link(repo string, digest v1.Hash) string {
	return "oci://" + r.Host() + "/" + repo + "@" + digest.String()
}

// Close stops the registry.
func (r *contentRegistry) Close() { r.server.Close() }

// withoutLength drops the declared length of a response, so that it is
// streamed (chunked) whatever it turns out to be.
type withoutLength struct{ http.ResponseWriter }

func (w *withoutLength) WriteHeader(code int) {
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w *withoutLength) Write(p []byte) (int, error) { return w.ResponseWriter.Write(p) }

// hugeBlobs adds the huge layers to an in-memory blob store.
type hugeBlobs struct {
	memory registry.BlobHandler
}

func (b *hugeBlobs) huge(h v1.Hash) bool { return h == honestHuge || h == lyingHuge }

func (b *hugeBlobs) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	if b.huge(h) {
		return io.NopCloser(io.LimitReader(zeros{}, hugeSize)), nil
	}
	return b.memory.Get(ctx, repo, h)
}

func (b *hugeBlobs) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	if b.huge(h) {
		return hugeSize, nil
	}
	return b.memory.(registry.BlobStatHandler).Stat(ctx, repo, h)
}

func (b *hugeBlobs) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return b.memory.(registry.BlobPutHandler).Put(ctx, repo, h, rc)
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// startWebServer serves http content:
//   - /huge-length: 1 GiB with its Content-Length;
//   - /huge-chunked: 1 GiB streamed without a length;
//   - /redirect: a redirect to the unlisted server;
//   - /error: 500 with the marker in the body;
//   - anything else: the path as content.
func startWebServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge-length":
			w.Header().Set("Content-Length", strconv.Itoa(hugeSize))
			_, _ = io.Copy(w, io.LimitReader(zeros{}, hugeSize))
		case "/huge-chunked":
			w.WriteHeader(http.StatusOK)
			_, _ = io.Copy(w, io.LimitReader(zeros{}, hugeSize))
		case "/redirect":
			http.Redirect(w, r, env.unlisted.URL+"/manifest.yaml", http.StatusFound)
		case "/error":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(marker))
		default:
			_, _ = w.Write([]byte(r.URL.Path))
		}
	}))
}

package remote

import (
	"encoding/json"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// aggregatedAccept is what client-go's discovery asks for first: the
// aggregated form, every resource of every group in one response.
const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// TestRuntimeMapperAsksForOneGroupAtATime checks, against a real API server,
// that the runtime client's discovery of /apis gets the plain group list,
// not the aggregated discovery document the server would otherwise send
// (which the mapper would keep whole, for every runtime).
func TestRuntimeMapperAsksForOneGroupAtATime(t *testing.T) {
	RegisterTestingT(t)
	httpClient, err := rest.HTTPClientFor(kcp.Config())
	Expect(err).NotTo(HaveOccurred())

	get := func(c *http.Client) (contentType string, body []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, kcp.Config().Host+"/apis", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Accept", aggregatedAccept)
		resp, err := c.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		body, err = io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.Header.Get("Content-Type"), body
	}

	// The server offers the aggregated form: without the wrapper it is sent.
	contentType, _ := get(httpClient)
	Expect(contentType).To(ContainSubstring("as=APIGroupDiscoveryList"))

	contentType, body := get(withPerGroupDiscovery(httpClient))
	Expect(contentType).NotTo(ContainSubstring("APIGroupDiscoveryList"))
	groups := &metav1.APIGroupList{}
	Expect(json.Unmarshal(body, groups)).To(Succeed())
	Expect(groups.Groups).NotTo(BeEmpty())

	// And a cluster built for a runtime still maps what it is asked, core
	// and named groups alike.
	cluster, err := newCluster(rest.CopyConfig(kcp.Config()), httpClient, scheme, newKnown(Identity{}))
	Expect(err).NotTo(HaveOccurred())
	for _, gk := range []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "apps", Kind: "Deployment"}, {Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}} {
		mapping, err := cluster.Mapper.RESTMapping(gk)
		Expect(err).NotTo(HaveOccurred(), gk.String())
		Expect(mapping.Resource.Resource).To(Equal(strings.ToLower(gk.Kind) + "s"))
	}
	Expect(cluster.Client.List(t.Context(), &corev1.NamespaceList{})).To(Succeed())
}

// BenchmarkRuntimeMapperMemory reports the heap a runtime's client holds
// once it has mapped what a typical module uses (core, apps, CRDs): the
// per-runtime memory that 10,000 runtimes multiply.
func BenchmarkRuntimeMapperMemory(b *testing.B) {
	heapPerRuntime(b, false, func(c *Cluster) any { return c })
}

// BenchmarkIdleRuntimeMemory reports the heap a runtime holds once its
// connection was closed for idleness: what is known of it (the found
// mappings and the last TLS session here; controllers' memos come on top)
// without client, discovery data or HTTP/2 connection.
func BenchmarkIdleRuntimeMemory(b *testing.B) {
	heapPerRuntime(b, true, func(c *Cluster) any {
		c.close()
		return c.known
	})
}

// BenchmarkIdleRuntimeMemoryNoTLSSession is BenchmarkIdleRuntimeMemory
// without the runtime's TLS session: the difference is what keeping it
// costs.
func BenchmarkIdleRuntimeMemoryNoTLSSession(b *testing.B) {
	heapPerRuntime(b, true, func(c *Cluster) any {
		c.close()
		c.known.credentials.sessions = nil
		return c.known
	})
}

// heapPerRuntime builds a Cluster per iteration, maps a typical module's
// kinds with it, holds what keep returns of it, and reports the heap held
// per runtime. With ownTLS each runtime connects with its own transport and
// keeps its TLS session, as the cache builds them; otherwise they share one
// connection.
func heapPerRuntime(b *testing.B, ownTLS bool, keep func(*Cluster) any) {
	b.Helper()
	httpClient, err := rest.HTTPClientFor(kcp.Config())
	if err != nil {
		b.Fatal(err)
	}
	kinds := []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "Namespace"}, {Group: "apps", Kind: "Deployment"}, {Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}}
	kept := make([]any, 0, b.N)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	goroutines := goruntime.NumGoroutine()
	for b.Loop() {
		known, cfg, client := newKnown(Identity{}), rest.CopyConfig(kcp.Config()), httpClient
		if ownTLS {
			creds := newCredentials("1", nil)
			known.keepCredentials(creds)
			if client, err = httpClientFor(cfg, creds.sessions, nil); err != nil {
				b.Fatal(err)
			}
		}
		cluster, err := newCluster(cfg, client, scheme, known)
		if err != nil {
			b.Fatal(err)
		}
		for _, gk := range kinds {
			if _, err := cluster.Mapper.RESTMapping(gk); err != nil {
				b.Fatal(err)
			}
		}
		kept = append(kept, keep(cluster))
	}
	// Closed connections end their goroutines (and free their buffers) a
	// moment after the close; what is measured is what stays.
	for deadline := time.Now().Add(10 * time.Second); goruntime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	goruntime.GC()
	goruntime.GC() // pooled buffers go in the second
	goruntime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(kept)), "heap-bytes/runtime")
	goruntime.KeepAlive(kept)
}

package remote

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestSlotsCapEachRuntimeApart(t *testing.T) {
	s := NewSlots(2)
	r1, ok1 := s.TryAcquire("manifest", "a", "manifest/x", nil)
	_, ok2 := s.TryAcquire("kyma", "a", "kyma/x", nil)
	if !ok1 || !ok2 {
		t.Fatal("the first two reconciles of a runtime must get a slot")
	}
	if _, ok := s.TryAcquire("manifest", "a", "manifest/x", nil); ok {
		t.Fatal("a third reconcile of the same runtime got a slot, across controllers the cap is 2")
	}
	if _, ok := s.TryAcquire("manifest", "b", "manifest/x", nil); !ok {
		t.Fatal("another runtime must not be limited by a busy one")
	}
	r1()
	r1() // releasing twice frees one slot, not two
	if _, ok := s.TryAcquire("manifest", "a", "manifest/x", nil); !ok {
		t.Fatal("a released slot is free again")
	}
	if _, ok := s.TryAcquire("manifest", "a", "manifest/x", nil); ok {
		t.Fatal("a double release freed a second slot")
	}
}

func TestSlotsWithoutCap(t *testing.T) {
	for _, s := range []*Slots{NewSlots(0), nil} {
		for range 100 {
			if _, ok := s.TryAcquire("manifest", "a", "manifest/x", nil); !ok {
				t.Fatal("no cap means every reconcile gets a slot")
			}
		}
	}
}

func TestRetryAfterIsShortAndJittered(t *testing.T) {
	for range 100 {
		if d := RetryAfter(); d < SlotRetryDelay || d >= SlotRetryDelay*3/2 {
			t.Fatalf("RetryAfter %s outside [%s, %s)", d, SlotRetryDelay, SlotRetryDelay*3/2)
		}
	}
}

// TestKymasOnOneServerShareItsSlots registers two Kymas whose kubeconfig
// Secrets point at the same real API server, and a third at another
// server URL. Whatever Kyma a reconcile is for, the two share one cap: the
// gate's own accounting never holds more than the cap for their server,
// and a reconcile of either waits when the other holds the slots.
func TestKymasOnOneServerShareItsSlots(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := namespace(t)
	const perRuntime = 2
	cache := NewCache(admin, admin, Options{Scheme: scheme, Namespace: ns, MaxWorkersPerRuntime: perRuntime})
	for _, s := range []*corev1.Secret{
		kubeconfigSecret(ns, "kyma-a", "127.0.0.1"),
		kubeconfigSecret(ns, "kyma-b", "127.0.0.1"),
		kubeconfigSecret(ns, "kyma-c", "localhost"),
	} {
		g.Expect(admin.Create(ctx, s)).To(Succeed())
	}
	shared := serverKey(kcp.Config().Host)
	other := serverKey(strings.Replace(kcp.Config().Host, "127.0.0.1", "localhost", 1))
	g.Expect(shared).NotTo(Equal(other))

	// Eight reconciles, four of each Kyma, ask at once before any connection
	// was built: exactly the cap get in, since nothing is released.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		releases []func()
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, wait := Gate(cache, "manifest", []string{"kyma-a", "kyma-b"}[i%2], fmt.Sprint(i), nil)
			if release == nil {
				if wait <= 0 {
					t.Error("a refused reconcile must be told to come back later")
				}
				return
			}
			mu.Lock()
			releases = append(releases, release)
			mu.Unlock()
		}()
	}
	wg.Wait()
	g.Expect(releases).To(HaveLen(perRuntime), "two Kymas of one server got more than its cap together")
	g.Expect(cache.slots.inUse()).To(Equal(map[string]int{shared: perRuntime}))

	// Another server is not held up by the busy one.
	releaseC, ok := cache.TryAcquire("kyma", "kyma-c", "kyma/x", nil)
	g.Expect(ok).To(BeTrue())
	g.Expect(cache.slots.inUse()).To(Equal(map[string]int{shared: perRuntime, other: 1}))

	// The connection Get builds takes the kubeconfig TryAcquire validated,
	// and the slots stay the server's once a connection exists.
	validated := cache.runtimes["kyma-b"].known.credentials
	cluster, err := cache.Get(ctx, "kyma-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Identity().Server).To(Equal(kcp.Config().Host))
	g.Expect(cluster.known.credentials).To(BeIdenticalTo(validated), "the kubeconfig is validated once")
	_, ok = cache.TryAcquire("kyma", "kyma-b", "kyma/x", nil)
	g.Expect(ok).To(BeFalse(), "kyma-a's reconciles hold kyma-b's server")

	// A released slot is free for either Kyma of the server.
	releases[0]()
	releaseB, ok := cache.TryAcquire("kyma", "kyma-b", "kyma/x", nil)
	g.Expect(ok).To(BeTrue())
	_, ok = cache.TryAcquire("kyma", "kyma-a", "kyma/x", nil)
	g.Expect(ok).To(BeFalse())
	g.Expect(cache.slots.inUse()).To(Equal(map[string]int{shared: perRuntime, other: 1}))

	releaseB()
	releases[1]()
	releaseC()
	g.Expect(cache.slots.inUse()).To(BeEmpty())
}

// TestKymaWithoutARuntimeTakesSlotsOfItsOwn: a Kyma whose Secret is missing
// or refused reaches no runtime; it is let in, under its own name, so that
// its reconcile can report what is wrong.
func TestKymaWithoutARuntimeTakesSlotsOfItsOwn(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cache := NewCache(admin, admin, Options{Scheme: scheme, Namespace: ns, MaxWorkersPerRuntime: 1})
	refused := kubeconfigSecret(ns, "kyma-refused", "127.0.0.1")
	refused.Data[KubeconfigKey] = []byte("not a kubeconfig")
	g.Expect(admin.Create(t.Context(), refused)).To(Succeed())

	_, ok := cache.TryAcquire("kyma", "kyma-missing", "kyma/x", nil)
	g.Expect(ok).To(BeTrue())
	_, ok = cache.TryAcquire("kyma", "kyma-refused", "kyma/x", nil)
	g.Expect(ok).To(BeTrue())
	g.Expect(cache.slots.inUse()).To(Equal(map[string]int{"kyma:kyma-missing": 1, "kyma:kyma-refused": 1}))
}

func TestServerKey(t *testing.T) {
	tests := []struct{ a, b string }{
		{"https://API.example.com", "https://api.example.com:443/"},
		{"HTTPS://api.example.com:6443/", "https://api.example.com:6443"},
		{"https://[::1]:6443", "https://[::1]:6443/"},
	}
	for _, tt := range tests {
		if serverKey(tt.a) != serverKey(tt.b) {
			t.Errorf("%s and %s are one server, keys %s and %s", tt.a, tt.b, serverKey(tt.a), serverKey(tt.b))
		}
	}
	different := []struct{ a, b string }{
		{"https://api.example.com", "https://api.example.com:6443"},
		{"https://proxy.example.com/k8s/clusters/a", "https://proxy.example.com/k8s/clusters/b"},
		{"https://127.0.0.1:6443", "https://localhost:6443"},
	}
	for _, tt := range different {
		if serverKey(tt.a) == serverKey(tt.b) {
			t.Errorf("%s and %s are two servers, both keyed %s", tt.a, tt.b, serverKey(tt.a))
		}
	}
}

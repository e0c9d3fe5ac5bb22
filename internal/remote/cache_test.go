package remote

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// One real control plane for the package: it holds the kubeconfig Secrets
// and is the runtime they point at.
var (
	kcp    *testcluster.ControlPlane
	admin  client.Client
	scheme *k8sruntime.Scheme
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	kcp, err = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = kcp.Stop() }()
	scheme = clientgoscheme.Scheme
	if admin, err = client.New(kcp.Config(), client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// namespace creates a namespace of the test for its Secrets.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "remote-"}}
	if err := admin.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	return ns.Name
}

// kubeconfigSecret registers kcp under kymaName, its server written as
// host (127.0.0.1 or localhost: two addresses of one API server, two
// runtimes to the operator).
func kubeconfigSecret(ns, kymaName, host string) *corev1.Secret {
	raw := bytes.Replace(kcp.Kubeconfig(), []byte("https://127.0.0.1:"), []byte("https://"+host+":"), 1)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kymaName + "-kubeconfig", Namespace: ns, Labels: map[string]string{v1beta2.KymaNameLabel: kymaName}},
		Data:       map[string][]byte{KubeconfigKey: raw},
	}
}

// crdMemo and catalogMemo stand for two controllers' memos.
type (
	crdMemo     string
	catalogMemo struct{ revisions map[string]string }
)

func TestClusterKeepsMemosForItsRuntimeOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := namespace(t)
	cache := NewCache(admin, admin, Options{Scheme: scheme, Namespace: ns})
	secret := kubeconfigSecret(ns, "kyma-a", "127.0.0.1")
	g.Expect(admin.Create(ctx, secret)).To(Succeed())

	first, err := cache.Get(ctx, "kyma-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Identity()).To(Equal(Identity{SecretUID: secret.UID, Server: kcp.Config().Host}))
	Remember(first, crdMemo("crds@1"))
	again, err := cache.Get(ctx, "kyma-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(first), "an unchanged Secret keeps its client")

	// A changed Secret (rotated credentials) gets a new client; the runtime
	// is the same, and so is what is known of it.
	secret.Annotations = map[string]string{"rotated": "yes"}
	g.Expect(admin.Update(ctx, secret)).To(Succeed())
	rotated, err := cache.Get(ctx, "kyma-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rotated).NotTo(BeIdenticalTo(first), "a changed Secret gets a new client")
	memo, _ := Recall[crdMemo](rotated)
	g.Expect(memo).To(Equal(crdMemo("crds@1")))

	// The Secret points at another server: another runtime, nothing known.
	secret.Data = kubeconfigSecret(ns, "kyma-a", "localhost").Data
	g.Expect(admin.Update(ctx, secret)).To(Succeed())
	moved, err := cache.Get(ctx, "kyma-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved.Identity().Server).To(HavePrefix("https://localhost:"))
	_, known := Recall[crdMemo](moved)
	g.Expect(known).To(BeFalse(), "the memo of the old runtime is not the new runtime's")
	Remember(moved, crdMemo("crds@2"))

	// Deleted and created again, with the same content: a new registration.
	g.Expect(admin.Delete(ctx, secret)).To(Succeed())
	recreated := kubeconfigSecret(ns, "kyma-a", "localhost")
	g.Expect(admin.Create(ctx, recreated)).To(Succeed())
	fresh, err := cache.Get(ctx, "kyma-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fresh.Identity()).To(Equal(Identity{SecretUID: recreated.UID, Server: moved.Identity().Server}))
	_, known = Recall[crdMemo](fresh)
	g.Expect(known).To(BeFalse(), "a recreated Secret registers a new runtime")
}

func TestEvictOnError(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	cache := NewCache(admin, admin, Options{Scheme: scheme, Namespace: ns, RequestTimeout: 5 * time.Second})
	if err := admin.Create(ctx, kubeconfigSecret(ns, "kyma-b", "127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	unreachable := kubeconfigSecret(ns, "kyma-gone", "127.0.0.1")
	unreachable.Data[KubeconfigKey] = bytes.Replace(unreachable.Data[KubeconfigKey],
		[]byte(kcp.Config().Host), []byte("https://127.0.0.1:1"), 1)
	if err := admin.Create(ctx, unreachable); err != nil {
		t.Fatal(err)
	}

	// Real errors from real requests.
	reachable, err := cache.Get(ctx, "kyma-b")
	if err != nil {
		t.Fatal(err)
	}
	notFound := reachable.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "absent"}, &corev1.ConfigMap{})
	unknown := &unstructured.Unstructured{}
	unknown.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.invalid", Version: "v1", Kind: "Nothing"})
	noKind := reachable.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, unknown)
	gone, err := cache.Get(ctx, "kyma-gone")
	if err != nil {
		t.Fatal(err)
	}
	refused := gone.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &corev1.ConfigMap{})

	tests := []struct {
		name        string
		kyma        string
		err         error
		wantEvicted bool
		wantMemo    bool
	}{
		{name: "no error", kyma: "kyma-b", err: nil, wantEvicted: false, wantMemo: true},
		{name: "connection refused evicts the whole runtime", kyma: "kyma-gone", err: refused, wantEvicted: true, wantMemo: false},
		{name: "NotFound drops the memos only", kyma: "kyma-b", err: notFound, wantEvicted: false, wantMemo: false},
		{name: "NoKindMatch drops the memos only", kyma: "kyma-b", err: fmt.Errorf("applying: %w", noKind), wantEvicted: false, wantMemo: false},
		{name: "another API error keeps everything", kyma: "kyma-b", err: conflictError(t, ns), wantEvicted: false, wantMemo: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before, err := cache.Get(ctx, tt.kyma)
			g.Expect(err).NotTo(HaveOccurred())
			Remember(before, crdMemo("crds@1"))
			Remember(before, catalogMemo{revisions: map[string]string{"a": "1"}})

			g.Expect(cache.EvictOnError(tt.kyma, tt.err)).To(Equal(tt.wantEvicted))
			after, err := cache.Get(ctx, tt.kyma)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.wantEvicted {
				g.Expect(after).NotTo(BeIdenticalTo(before), "an evicted runtime gets a new client and mapper")
			} else {
				g.Expect(after).To(BeIdenticalTo(before))
			}
			_, crds := Recall[crdMemo](after)
			_, catalog := Recall[catalogMemo](after)
			g.Expect(crds).To(Equal(tt.wantMemo), "CRD memo")
			g.Expect(catalog).To(Equal(tt.wantMemo), "catalog memo")
		})
	}
}

// conflictError is an API answer about one request, not about the runtime:
// an update from a stale read.
func conflictError(t *testing.T, ns string) error {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conflict", Namespace: ns}}
	if err := admin.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	stale := cm.DeepCopy()
	cm.Data = map[string]string{"a": "b"}
	if err := admin.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	err := admin.Update(t.Context(), stale)
	if !apierrors.IsConflict(err) {
		t.Fatalf("a stale update: %v, want a conflict", err)
	}
	return err
}

func TestMissingSecretIsConfirmedWithTheAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := namespace(t)
	// A real informer cache that does not hold the Secret, as one that has
	// not caught up with its creation does not.
	lagging := laggingCache(t, ns)
	g.Expect(admin.Create(ctx, kubeconfigSecret(ns, "kyma-c", "127.0.0.1"))).To(Succeed())

	_, err := NewCache(lagging, nil, Options{Scheme: scheme, Namespace: ns}).Get(ctx, "kyma-c")
	g.Expect(err).To(MatchError(ErrNoKubeconfigSecret), "the cache alone takes the runtime for gone")

	cluster, err := NewCache(lagging, admin, Options{Scheme: scheme, Namespace: ns}).Get(ctx, "kyma-c")
	g.Expect(err).NotTo(HaveOccurred(), "the API read finds the Secret the cache does not have")
	g.Expect(cluster.Identity().Server).To(Equal(kcp.Config().Host))

	_, err = NewCache(lagging, admin, Options{Scheme: scheme, Namespace: ns}).Get(ctx, "kyma-none")
	g.Expect(err).To(MatchError(ErrNoKubeconfigSecret), "no Secret in the cache nor in the API")
	g.Expect(err.Error()).To(ContainSubstring(v1beta2.KymaNameLabel+"=kyma-none"), "the error says what to create")

	// When the API cannot be asked, the runtime is not declared gone.
	cfg := kcp.Config()
	cfg.Impersonate.UserName = "nobody"
	nobody, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = NewCache(lagging, nobody, Options{Scheme: scheme, Namespace: ns}).Get(ctx, "kyma-none")
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, ErrNoKubeconfigSecret)).To(BeFalse(), "a failed confirmation is not a missing Secret: %v", err)
}

// laggingCache is a started informer cache of ns that holds only Secrets
// labelled lagging=seen, which none of the tests' Secrets is.
func laggingCache(t *testing.T, ns string) client.Reader {
	t.Helper()
	c, err := cache.New(kcp.Config(), cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{"lagging": "seen"})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("the cache did not start")
	}
	// The informer is created and synced on the first read.
	if err := c.List(t.Context(), &corev1.SecretList{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAppliersWriteToTheRuntime(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := namespace(t)
	g.Expect(admin.Create(ctx, kubeconfigSecret(ns, "kyma-d", "127.0.0.1"))).To(Succeed())
	cluster, err := NewCache(admin, admin, Options{Scheme: scheme, Namespace: ns}).Get(ctx, "kyma-d")
	g.Expect(err).NotTo(HaveOccurred())

	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace(ns)
	cm.SetName("applied")
	result, err := cluster.Applier().Apply(ctx, []*unstructured.Unstructured{cm.DeepCopy()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Changed).To(Equal(1))
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "applied"}, &corev1.ConfigMap{})).To(Succeed())
	result, err = cluster.ApplierAs("remote-test").Apply(ctx, []*unstructured.Unstructured{cm.DeepCopy()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Changed).To(BeZero(), "an unchanged object is not written")
}

func TestMemosAreTypedAndForgottenTogether(t *testing.T) {
	c := &Cluster{known: newKnown(Identity{})}
	if _, ok := Recall[crdMemo](c); ok {
		t.Fatal("a new runtime has no memo")
	}
	Remember(c, crdMemo("crds@1"))
	Remember(c, catalogMemo{revisions: map[string]string{"a": "1"}})
	if got, _ := Recall[crdMemo](c); got != "crds@1" {
		t.Fatalf("CRD memo %q, want crds@1", got)
	}
	if got, _ := Recall[catalogMemo](c); got.revisions["a"] != "1" {
		t.Fatalf("catalog memo %v, another type's memo must not overwrite it", got)
	}
	c.Forget()
	_, crds := Recall[crdMemo](c)
	_, catalog := Recall[catalogMemo](c)
	if crds || catalog {
		t.Fatal("Forget drops every memo of the runtime")
	}
}

func TestIdleConnectionIsClosedAndWhatIsKnownStays(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := namespace(t)
	cache := NewCache(admin, admin, Options{Scheme: scheme, Namespace: ns, IdleTimeout: time.Minute})
	now := time.Now()
	cache.now = func() time.Time { return now }
	for _, name := range []string{"idle-a", "idle-b"} {
		g.Expect(admin.Create(ctx, kubeconfigSecret(ns, name, "127.0.0.1"))).To(Succeed())
	}

	first, err := cache.Get(ctx, "idle-a")
	g.Expect(err).NotTo(HaveOccurred())
	Remember(first, crdMemo("crds@1"))
	configMaps := schema.GroupKind{Kind: "ConfigMap"}
	_, err = first.Mapper.RESTMapping(configMaps, "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Client.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))).To(Succeed())

	// Asked for within the timeout: the same connection, used again now.
	now = now.Add(50 * time.Second)
	again, err := cache.Get(ctx, "idle-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(first))

	// Another runtime's Get a minute later finds idle-a idle and closes it.
	now = now.Add(61 * time.Second)
	_, err = cache.Get(ctx, "idle-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cache.runtimes["idle-a"].cluster).To(BeNil(), "an idle connection is closed")
	g.Expect(cache.runtimes["idle-b"].cluster).NotTo(BeNil(), "a connection just used stays open")

	// The next Get builds a new connection that knows what the old one did.
	rebuilt, err := cache.Get(ctx, "idle-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rebuilt).NotTo(BeIdenticalTo(first))
	g.Expect(rebuilt.Identity()).To(Equal(first.Identity()))
	g.Expect(rebuilt.known.credentialsOf(rebuilt.Identity().SecretUID, rebuilt.secretVersion)).NotTo(BeNil(), "the kubeconfig as validated is kept")
	memo, remembered := Recall[crdMemo](rebuilt)
	g.Expect(remembered).To(BeTrue(), "memos outlive an idle close")
	g.Expect(memo).To(Equal(crdMemo("crds@1")))
	_, found := rebuilt.known.mappings.load("/ConfigMap/v1")
	g.Expect(found).To(BeTrue(), "found REST mappings outlive an idle close")
	g.Expect(rebuilt.Client.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))).To(Succeed())
	// The closed connection still serves a reconcile that held it.
	g.Expect(first.Client.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))).To(Succeed())

	// Eviction drops what is known, too.
	cache.Evict("idle-a")
	fresh, err := cache.Get(ctx, "idle-a")
	g.Expect(err).NotTo(HaveOccurred())
	_, remembered = Recall[crdMemo](fresh)
	g.Expect(remembered).To(BeFalse(), "an evicted runtime is learnt afresh")
}

func TestRememberingMapperAnswersFromFoundMappings(t *testing.T) {
	g := NewWithT(t)
	k := newKnown(Identity{})
	discovery := &countingMapper{RESTMapper: meta.NewDefaultRESTMapper(nil)}
	deployments := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	discovery.RESTMapper.(*meta.DefaultRESTMapper).Add(deployments, meta.RESTScopeNamespace)
	mapper := RememberingMapper{RESTMapper: discovery, Found: &k.mappings}

	for range 3 {
		mapping, err := mapper.RESTMapping(deployments.GroupKind(), "v1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mapping.Scope.Name()).To(Equal(meta.RESTScopeNameNamespace))
	}
	g.Expect(discovery.asked).To(Equal(1), "a found mapping is remembered")

	_, err := mapper.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Missing"}, "v1")
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue())
	_, err = mapper.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Missing"}, "v1")
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue())
	g.Expect(discovery.asked).To(Equal(3), "a kind not found is asked for again: its CRD may come")

	// A new connection of the same runtime needs no discovery for it.
	other := &countingMapper{RESTMapper: meta.NewDefaultRESTMapper(nil)}
	_, err = RememberingMapper{RESTMapper: other, Found: &k.mappings}.RESTMapping(deployments.GroupKind(), "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.asked).To(BeZero())

	k.forget()
	_, err = RememberingMapper{RESTMapper: other, Found: &k.mappings}.RESTMapping(deployments.GroupKind(), "v1")
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue(), "Forget drops the found mappings")
}

// countingMapper counts the mappings asked of a RESTMapper.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.asked++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// TestConnectionBuiltAfterIdleCloseResumesTLS: the connection built again
// after an idle close resumes the runtime's last TLS session instead of a
// full handshake and takes the kubeconfig as validated before; a Secret
// changed since (rotated credentials) is validated again and starts with
// no session to resume.
func TestConnectionBuiltAfterIdleCloseResumesTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := namespace(t)
	var mu sync.Mutex
	var resumed []bool
	handshakes := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(resumed)
	}
	cache := NewCache(admin, admin, Options{Scheme: scheme, Namespace: ns, IdleTimeout: time.Minute, observeTLS: func(s tls.ConnectionState) {
		mu.Lock()
		resumed = append(resumed, s.DidResume)
		mu.Unlock()
	}})
	now := time.Now()
	cache.now = func() time.Time { return now }
	secret := kubeconfigSecret(ns, "resume", "127.0.0.1")
	g.Expect(admin.Create(ctx, secret)).To(Succeed())
	use := func() {
		cluster, err := cache.Get(ctx, "resume")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cluster.Client.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))).To(Succeed())
	}
	closeIdle := func() {
		now = now.Add(2 * time.Minute)
		cache.mu.Lock()
		cache.closeIdleLocked(now)
		cache.mu.Unlock()
	}

	use()
	g.Expect(handshakes()).To(Equal([]bool{false}), "the first connection makes a full handshake")
	accepted := cache.runtimes["resume"].known.credentials.accepted
	closeIdle()
	use()
	g.Expect(cache.runtimes["resume"].known.credentials.accepted).To(BeIdenticalTo(accepted), "the same Secret's kubeconfig is not parsed and checked again")
	g.Expect(handshakes()).To(Equal([]bool{false, true}), "the connection built after an idle close resumes the session")

	// Rotated credentials: the Secret changes, the runtime stays the same.
	secret.Annotations = map[string]string{"rotated": "yes"}
	g.Expect(admin.Update(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Secret{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(secret), got)).To(Succeed())
		g.Expect(got.ResourceVersion).To(Equal(secret.ResourceVersion))
	}).Should(Succeed())
	use()
	g.Expect(handshakes()).To(Equal([]bool{false, true, false}), "new credentials make a full handshake")
	g.Expect(cache.runtimes["resume"].known.credentials.accepted).NotTo(BeIdenticalTo(accepted), "a changed Secret is validated again")
}

package consoleauth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/console"
	"github.com/runtime-fleet/lifecycle-manager/internal/console/consoleauth"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

var (
	cp *testcluster.ControlPlane
	cs kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	cp, err = testcluster.StartControlPlane(context.Background(), testcluster.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err)
		return 1
	}
	defer cp.Stop() //nolint:errcheck // best effort at exit; processes die with the binary anyway
	if cs, err = kubernetes.NewForConfig(cp.Config()); err != nil {
		fmt.Fprintln(os.Stderr, "creating client:", err)
		return 1
	}
	return m.Run()
}

// newNamespace gives a test a namespace of its own.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "consoleauth-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// serviceAccountToken creates a ServiceAccount and returns a token the API
// server issued for it.
func serviceAccountToken(t *testing.T, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceAccount: %v", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token: %v", err)
	}
	return tr.Status.Token
}

func newReviewer(opts consoleauth.TokenReviewerOptions) *consoleauth.TokenReviewer {
	return consoleauth.NewTokenReviewer(cs.AuthenticationV1().TokenReviews(), opts)
}

func request(header, cookie string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "https://console.example/", nil)
	if header != "" {
		r.Header.Set("Authorization", header)
	}
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: consoleauth.TokenCookie, Value: cookie})
	}
	return r
}

// A real ServiceAccount token authenticates, from the header or the login
// cookie; garbage, another scheme or nothing does not, and anonymous access
// must be asked for.
func TestTokenReviewAuthenticates(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	token := serviceAccountToken(t, ns, "viewer")
	reviewer := newReviewer(consoleauth.TokenReviewerOptions{})

	for _, r := range []*http.Request{request("Bearer "+token, ""), request("", token)} {
		v, err := reviewer.Authenticate(r)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.Name).To(Equal("system:serviceaccount:" + ns + ":viewer"))
		g.Expect(v.Groups).To(ContainElement("system:serviceaccounts:" + ns))
	}

	_, err := reviewer.Authenticate(request("Bearer not-a-token", ""))
	g.Expect(err).To(MatchError(consoleauth.ErrTokenRejected))
	_, err = reviewer.Authenticate(request("Basic dXNlcjpwYXNz", ""))
	g.Expect(err).To(MatchError(consoleauth.ErrNotBearer))
	_, err = reviewer.Authenticate(request("", ""))
	g.Expect(err).To(MatchError(consoleauth.ErrNoCredentials))

	// Answers, refusals too, are reused within the TTL: no review is
	// repeated.
	before := apiRequests(g, "tokenreviews")
	_, err = reviewer.Authenticate(request("Bearer not-a-token", ""))
	g.Expect(err).To(MatchError(consoleauth.ErrTokenRejected))
	_, err = reviewer.Authenticate(request("Bearer "+token, ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apiRequests(g, "tokenreviews")).To(Equal(before), "a cached answer cost a review")

	anonymous := newReviewer(consoleauth.TokenReviewerOptions{AllowAnonymous: true})
	v, err := anonymous.Authenticate(request("", ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(consoleauth.Anonymous))
	_, err = anonymous.Authenticate(request("Bearer not-a-token", ""))
	g.Expect(err).To(MatchError(consoleauth.ErrTokenRejected), "a refused token passed for anonymous")
}

// allowListKymas lets user list Kymas in namespace, by a Role and a
// RoleBinding in real RBAC.
func allowListKymas(t *testing.T, namespace, user string) {
	t.Helper()
	ctx := context.Background()
	_, err := cs.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "kyma-viewer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1beta2.GroupVersion.Group}, Resources: []string{"kymas"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Role: %v", err)
	}
	_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kyma-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "kyma-viewer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating RoleBinding: %v", err)
	}
}

// A viewer bound to list Kymas in A may there, not in B, and not other
// kinds in A: the API server's RBAC decides.
func TestSubjectAccessFollowsRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := newNamespace(t), newNamespace(t)
	allowListKymas(t, a, "alice")
	access := consoleauth.NewSubjectAccess(cs.AuthorizationV1().SubjectAccessReviews(), consoleauth.CacheOptions{TTL: time.Nanosecond})
	alice := console.Viewer{Name: "alice", Groups: []string{"system:authenticated"}}

	g.Eventually(func() (bool, error) { return access.CanList(ctx, alice, "kymas", a) }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	for _, c := range []struct{ resource, namespace string }{{"kymas", b}, {"modulerollouts", a}, {"runtimebackups", a}} {
		allowed, err := access.CanList(ctx, alice, c.resource, c.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(allowed).To(BeFalse(), "alice may list %s in %s", c.resource, c.namespace)
	}
	allowed, err := access.CanList(ctx, console.Viewer{Name: "bob"}, "kymas", a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(allowed).To(BeFalse(), "bob, without a binding, may list kymas")
}

// fakeClock is a settable time for the caches.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// apiRequests counts the reviews of a kind (tokenreviews,
// subjectaccessreviews) the API server received.
func apiRequests(g Gomega, resource string) float64 {
	n, err := cp.Requests(context.Background(), func(l map[string]string) bool {
		return l["resource"] == resource && l["verb"] == "POST"
	})
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

// An answer is reused within the TTL, without a review, and asked again
// after it: a revoked right is honoured once the TTL has passed.
func TestAccessCacheExpires(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	allowListKymas(t, ns, "carol")
	carol := console.Viewer{Name: "carol"}
	// RBAC reaches the authorizer through its informer: wait until it did,
	// with an access that caches nothing.
	fresh := consoleauth.NewSubjectAccess(cs.AuthorizationV1().SubjectAccessReviews(), consoleauth.CacheOptions{TTL: time.Nanosecond})
	g.Eventually(func() (bool, error) { return fresh.CanList(ctx, carol, "kymas", ns) }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())

	clock := &fakeClock{now: time.Now()}
	access := consoleauth.NewSubjectAccess(cs.AuthorizationV1().SubjectAccessReviews(), consoleauth.CacheOptions{TTL: 30 * time.Second, Now: clock.Now})
	g.Expect(access.CanList(ctx, carol, "kymas", ns)).To(BeTrue())
	before := apiRequests(g, "subjectaccessreviews")
	g.Expect(access.CanList(ctx, carol, "kymas", ns)).To(BeTrue())
	g.Expect(apiRequests(g, "subjectaccessreviews")).To(Equal(before), "a cached answer cost a review")

	g.Expect(cs.RbacV1().RoleBindings(ns).Delete(ctx, "kyma-viewer", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() (bool, error) { return fresh.CanList(ctx, carol, "kymas", ns) }, 30*time.Second, 100*time.Millisecond).Should(BeFalse())
	clock.Add(29 * time.Second)
	g.Expect(access.CanList(ctx, carol, "kymas", ns)).To(BeTrue(), "the answer was not cached for its TTL")
	clock.Add(2 * time.Second)
	g.Expect(access.CanList(ctx, carol, "kymas", ns)).To(BeFalse(), "the cached answer outlived its TTL")
}

// loginForm GETs the login page and returns its CSRF cookie and field.
func loginForm(g Gomega, h http.Handler) (*http.Cookie, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://console.example/login", nil))
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	csrf := cookieNamed(rec, consoleauth.CSRFCookie)
	g.Expect(csrf).NotTo(BeNil())
	g.Expect(rec.Body.String()).To(ContainSubstring(`name="csrf" value="` + csrf.Value + `"`))
	return csrf, csrf.Value
}

// cookieNamed is the cookie of that name the response sets, or nil.
func cookieNamed(rec *httptest.ResponseRecorder, name string) *http.Cookie {
	for _, c := range rec.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func postLogin(h http.Handler, csrf *http.Cookie, field, token, origin string) *httptest.ResponseRecorder {
	form := url.Values{"token": {token}, "csrf": {field}}
	r := httptest.NewRequest(http.MethodPost, "https://console.example/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if csrf != nil {
		r.AddCookie(csrf)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// The login form stores a token the API server accepts in an HttpOnly,
// Secure, SameSite=Strict cookie; it refuses a garbage token with 401, and
// a POST without the form's CSRF token or from another origin with 403.
func TestLoginForm(t *testing.T) {
	g := NewWithT(t)
	token := serviceAccountToken(t, newNamespace(t), "viewer")
	login := &consoleauth.Login{Reviewer: newReviewer(consoleauth.TokenReviewerOptions{})}

	csrf, field := loginForm(g, login)
	g.Expect(csrf.HttpOnly && csrf.Secure && csrf.SameSite == http.SameSiteStrictMode).To(BeTrue(), "CSRF cookie %+v", csrf)

	g.Expect(postLogin(login, nil, field, token, "").Code).To(Equal(http.StatusForbidden), "no CSRF cookie")
	g.Expect(postLogin(login, csrf, "forged", token, "").Code).To(Equal(http.StatusForbidden), "wrong CSRF field")
	g.Expect(postLogin(login, csrf, field, token, "https://evil.example").Code).To(Equal(http.StatusForbidden), "foreign origin")

	rec := postLogin(login, csrf, field, "garbage", "https://console.example")
	g.Expect(rec.Code).To(Equal(http.StatusUnauthorized))
	g.Expect(rec.Body.String()).NotTo(ContainSubstring("garbage"), "the page quotes the token")

	rec = postLogin(login, csrf, field, token, "https://console.example")
	g.Expect(rec.Code).To(Equal(http.StatusSeeOther))
	session := cookieNamed(rec, consoleauth.TokenCookie)
	g.Expect(session).NotTo(BeNil())
	g.Expect(session.HttpOnly && session.Secure && session.SameSite == http.SameSiteStrictMode).To(BeTrue(), "token cookie %+v", session)
	v, err := newReviewer(consoleauth.TokenReviewerOptions{}).Authenticate(request("", session.Value))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Name).To(HaveSuffix(":viewer"))
}

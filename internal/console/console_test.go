package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/console"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

const (
	namespace = "kcp-console"
	// secretMarker is Secret data no response may ever contain.
	secretMarker = "console-must-never-show-this"
	timeout      = time.Minute
)

var env struct {
	cp  *testcluster.ControlPlane
	kcp client.Client
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	scheme := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1beta2.AddToScheme(scheme)
	if env.kcp, err = client.New(cp.Config(), client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.cp = cp
	if err := env.kcp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// access is a test's Access: it allows what allowed names, for every viewer.
type access map[string]bool

func (a access) CanList(_ context.Context, _ console.Viewer, resource, _ string) (bool, error) {
	return a[resource], nil
}

// startConsole serves a console of the namespace with the LocalAuthenticator.
func startConsole(t *testing.T, a console.Access) (url string, auth *console.LocalAuthenticator) {
	t.Helper()
	auth, err := console.NewLocalAuthenticator("tester")
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Options{Config: env.cp.Config(), Namespace: namespace, Authenticator: auth, Access: a})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = c.Start(ctx) }()
	srv := httptest.NewServer(c)
	t.Cleanup(func() { srv.Close(); cancel() })
	return srv.URL, auth
}

// get fetches a page with the viewer's cookie.
func get(g Gomega, auth *console.LocalAuthenticator, url string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.AddCookie(&http.Cookie{Name: "lmctl-console", Value: auth.Token})
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

// kyma creates a Kyma with the given status.
func kyma(t *testing.T, name string, status v1beta2.KymaStatus) {
	t.Helper()
	ctx := context.Background()
	k := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"team": "console-test"}},
		Spec: v1beta2.KymaSpec{Channel: "regular"}}
	if err := env.kcp.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.kcp.Delete(ctx, k) })
	k.Status = status
	if err := env.kcp.Status().Update(ctx, k); err != nil {
		t.Fatal(err)
	}
}

func condition(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(time.Now().Add(-5 * time.Minute))}
}

// The fleet page lists every runtime with its state, and shows one the
// operator cannot reach, or whose watcher went silent, as Unknown with its
// age, never Ready; the module matrix counts the modules by state.
func TestFleetShowsStatesAndHonestLiveness(t *testing.T) {
	g := NewWithT(t)
	ready := []v1beta2.ModuleStatus{{Name: "shop", Version: "1.0.0", Channel: "regular", State: v1beta2.StateReady}}
	kyma(t, "fleet-ready", v1beta2.KymaStatus{State: v1beta2.StateReady, Modules: ready,
		Conditions: []metav1.Condition{condition(v1beta2.ConditionReady, metav1.ConditionTrue, "Ready", "")}})
	kyma(t, "fleet-unreachable", v1beta2.KymaStatus{State: v1beta2.StateReady, Modules: ready,
		Conditions: []metav1.Condition{condition(v1beta2.ConditionReady, metav1.ConditionFalse, "RuntimeUnavailable", "dial tcp: connection refused")}})
	kyma(t, "fleet-silent", v1beta2.KymaStatus{State: v1beta2.StateReady, Modules: ready,
		Conditions: []metav1.Condition{condition(v1beta2.ConditionReady, metav1.ConditionTrue, "Ready", ""),
			condition(v1beta2.ConditionWatcherReporting, metav1.ConditionFalse, v1beta2.ReasonWatcherSilent, "")}})
	url, auth := startConsole(t, access{"kymas": true, "manifests": true})

	g.Eventually(func(g Gomega) {
		code, body := get(g, auth, url+"/?label=team%3Dconsole-test")
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`<tr data-runtime="fleet-ready" data-state="Ready">`))
		g.Expect(body).To(ContainSubstring(`<tr data-runtime="fleet-unreachable" data-state="Unknown">`))
		g.Expect(body).To(ContainSubstring("the runtime cannot be reached, for 5m"))
		g.Expect(body).To(ContainSubstring(`<tr data-runtime="fleet-silent" data-state="Unknown">`))
		g.Expect(body).To(ContainSubstring("no report from the runtime&#39;s watcher for 5m"))
		g.Expect(body).To(MatchRegexp(`<span data-count="Ready">\d+</span>`))
		g.Expect(body).To(ContainSubstring(`<tr data-module="shop">`))
	}, timeout, 200*time.Millisecond).Should(Succeed())

	// Filters are the server's: by state, by text.
	_, body := get(g, auth, url+"/?state=Unknown&label=team%3Dconsole-test")
	g.Expect(body).To(ContainSubstring(`data-runtime="fleet-silent"`))
	g.Expect(body).NotTo(ContainSubstring(`data-runtime="fleet-ready"`))
	_, body = get(g, auth, url+"/?q=unreach")
	g.Expect(body).To(ContainSubstring(`data-runtime="fleet-unreachable"`))
	g.Expect(body).NotTo(ContainSubstring(`data-runtime="fleet-silent"`))
	_, body = get(g, auth, url+"/?label=in+valid%28")
	g.Expect(body).To(ContainSubstring("is not a label selector"))

	// The header links only to the views this viewer may see.
	_, body = get(g, auth, url+"/")
	g.Expect(body).NotTo(ContainSubstring(`href="/rollouts"`))
	g.Expect(body).NotTo(ContainSubstring(`href="/backups"`))

	// The runtime page says what is known of each runtime being alive.
	for name, liveness := range map[string]string{
		"fleet-unreachable": "Unknown: the operator cannot reach the runtime&#39;s API server, for 5m",
		"fleet-silent":      "Unknown: no report from the runtime&#39;s watcher agent for 5m",
		"fleet-ready":       "No watcher agent reports from this runtime",
	} {
		code, body := get(g, auth, url+"/runtimes/"+name)
		g.Expect(code).To(Equal(http.StatusOK), name)
		g.Expect(body).To(ContainSubstring(liveness), name)
	}

	code, body := get(g, auth, url+"/runtimes/fleet-unreachable")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("dial tcp: connection refused"))
	g.Expect(body).To(ContainSubstring(`<tr data-module="shop" data-state="Ready">`))
	code, _ = get(g, auth, url+"/runtimes/no-such-runtime")
	g.Expect(code).To(Equal(http.StatusNotFound))
}

// A change of a runtime reaches an open event stream at once, and the
// row's fragment shows the new state.
func TestChangeIsPushed(t *testing.T) {
	g := NewWithT(t)
	kyma(t, "pushed", v1beta2.KymaStatus{State: v1beta2.StateProcessing})
	url, auth := startConsole(t, access{"kymas": true})
	g.Eventually(func(g Gomega) {
		_, body := get(g, auth, url+"/fragments/row/pushed")
		g.Expect(body).To(ContainSubstring(`data-state="Processing"`))
	}, timeout, 200*time.Millisecond).Should(Succeed())

	req, err := http.NewRequest(http.MethodGet, url+"/events", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.AddCookie(&http.Cookie{Name: "lmctl-console", Value: auth.Token})
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by the defer below; a goroutine reads the stream
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(resp.Body)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	g.Eventually(lines, timeout).Should(Receive(Equal(": connected")))

	k := &v1beta2.Kyma{}
	g.Expect(env.kcp.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "pushed"}, k)).To(Succeed())
	k.Status.State = v1beta2.StateError
	g.Expect(env.kcp.Status().Update(context.Background(), k)).To(Succeed())
	g.Eventually(lines, timeout).Should(Receive(Equal("data: pushed")))
	_, body := get(g, auth, url+"/fragments/row/pushed")
	g.Expect(body).To(ContainSubstring(`data-state="Error"`))
}

// A viewer who may not list Kymas sees no runtime at all, and is told why;
// nobody without the token gets in; no page or event contains Secret data,
// which the console never reads.
func TestAccessAndNoSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig-hidden", Namespace: namespace},
		StringData: map[string]string{"config": secretMarker}}
	g.Expect(env.kcp.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { _ = env.kcp.Delete(ctx, secret) })
	kyma(t, "hidden", v1beta2.KymaStatus{State: v1beta2.StateReady})

	url, auth := startConsole(t, access{})
	for _, page := range []string{"/", "/runtimes/hidden", "/modules/shop", "/rollouts", "/backups", "/events", "/fragments/row/hidden", "/fragments/counts"} {
		code, body := get(g, auth, url+page)
		g.Expect(code).To(Equal(http.StatusForbidden), page)
		g.Expect(body).To(ContainSubstring("ask for a RoleBinding"), page)
		g.Expect(body).NotTo(ContainSubstring("hidden"), page)
	}
	resp, err := http.Get(url + "/")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "no token, no console")

	url, auth = startConsole(t, access{"kymas": true, "manifests": true, "modulerollouts": true, "runtimebackups": true})
	g.Eventually(func(g Gomega) {
		_, body := get(g, auth, url+"/")
		g.Expect(body).To(ContainSubstring(`data-runtime="hidden"`))
		g.Expect(body).To(ContainSubstring(`href="/rollouts"`), "a viewer who may list rollouts has the link")
		g.Expect(body).To(ContainSubstring(`href="/backups"`), "a viewer who may list backups has the link")
	}, timeout, 200*time.Millisecond).Should(Succeed())
	for _, page := range []string{"/", "/runtimes/hidden", "/rollouts", "/backups", "/fragments/row/hidden", "/fragments/counts", "/static/console.js"} {
		_, body := get(g, auth, url+page)
		g.Expect(body).NotTo(ContainSubstring(secretMarker), page)
		g.Expect(body).NotTo(ContainSubstring("kubeconfig-hidden"), page)
	}
}

// The URL's token becomes a cookie and leaves the address bar; a request
// for another Host is refused (DNS rebinding).
func TestLocalAuthenticator(t *testing.T) {
	g := NewWithT(t)
	url, auth := startConsole(t, access{"kymas": true})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(url + "/?token=" + auth.Token)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Header.Get("Location")).NotTo(ContainSubstring(auth.Token))
	g.Expect(resp.Header.Get("Set-Cookie")).To(And(ContainSubstring("HttpOnly"), ContainSubstring("SameSite=Strict")))

	resp, err = noRedirect.Get(url + "/?token=wrong")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "a wrong token gets no cookie")
	g.Expect(resp.Header.Get("Set-Cookie")).To(BeEmpty())

	auth.Hosts = []string{"127.0.0.1:1"}
	code, body := get(g, auth, url+"/")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	g.Expect(strings.ToLower(body)).To(ContainSubstring("its own address"))
}

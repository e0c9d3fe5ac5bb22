package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testbrowser"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// timeout is how long a test waits for the operator and the console to
// settle on a real control plane of a loaded machine.
const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

// pages are the console's pages; every one is checked for Secret data and
// for what an outsider sees.
var pages = []string{"/", "/runtimes/" + kymaA, "/runtimes/" + kymaLost, "/modules/" + samplemodules.Sample, "/modules/" + samplemodules.Evolving, "/rollouts", "/backups"}

// open is a tab that sends token as the viewer's bearer token.
func open(t *testing.T, token string) *testbrowser.Page {
	return env.browser.NewPage(t, map[string]string{"Authorization": "Bearer " + token})
}

// row selects a runtime's row on the fleet page.
func row(kyma string) string { return fmt.Sprintf(`tr[data-runtime=%q]`, kyma) }

// kymaState is the Kyma's state and Ready reason as the API server has them.
func kymaState(g Gomega, name string) (state v1beta2.State, readyReason string) {
	kyma := &v1beta2.Kyma{}
	g.Expect(env.kcp.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: name}, kyma)).To(Succeed())
	for _, c := range kyma.Status.Conditions {
		if c.Type == v1beta2.ConditionReady {
			readyReason = c.Reason
		}
	}
	return kyma.Status.State, readyReason
}

// waitForFleet waits until the operator has made the reachable runtimes
// Ready and found kyma-lost unreachable.
func waitForFleet(t *testing.T) {
	t.Helper()
	for _, name := range []string{kymaA, kymaB, kymaLive} {
		Eventually(func(g Gomega) {
			kyma := &v1beta2.Kyma{}
			g.Expect(env.kcp.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: name}, kyma)).To(Succeed())
			g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), testenv.DescribeKyma(kyma))
		}, timeout, interval).Should(Succeed())
	}
	Eventually(func(g Gomega) {
		_, reason := kymaState(g, kymaLost)
		g.Expect(reason).To(Equal("RuntimeUnavailable"))
	}, timeout, interval).Should(Succeed())
}

// (a) The fleet page lists every Kyma of the control plane with its state,
// counts agree with the rows, the unreachable runtime is not shown Ready,
// and the runtime and module pages show what the operator reports.
func TestPagesRenderTheFleet(t *testing.T) {
	RegisterTestingT(t)
	waitForFleet(t)
	p := open(t, env.fleetViewer)

	Eventually(func(g Gomega) {
		g.Expect(p.Open(env.url + "/")).To(BeEquivalentTo(http.StatusOK))
		for _, name := range []string{kymaA, kymaB, kymaLive} {
			g.Expect(p.TryAttribute(row(name), "data-state")).To(Equal("Ready"), name)
		}
	}, timeout, interval).Should(Succeed())

	lost, err := p.TryAttribute(row(kymaLost), "data-state")
	Expect(err).NotTo(HaveOccurred())
	Expect(lost).NotTo(BeEmpty(), "the unreachable runtime has a row")
	Expect(lost).NotTo(Equal("Ready"), "an unreachable runtime is never shown Ready")
	Expect(p.Text(row(kymaLost))).To(MatchRegexp(`(?i)unknown|stale`), "its state is said in words, not only in colour")

	ready, err := strconv.Atoi(p.Text(`span[data-count="Ready"]`))
	Expect(err).NotTo(HaveOccurred())
	Expect(ready).To(Equal(p.Count(`tr[data-runtime][data-state="Ready"]`)), "the Ready count agrees with the Ready rows")
	Expect(ready).To(BeNumerically(">=", 3))
	Expect(p.Count(`[data-module="`+samplemodules.Sample+`"]`)).To(BeNumerically(">", 0), "the module × state matrix has the sample module")
	p.WaitVisible(`#live[data-live="connected"]`)
	p.Screenshot(filepath.Join(screenshots, "fleet.png"))

	Expect(p.Open(env.url + "/runtimes/" + kymaA)).To(BeEquivalentTo(http.StatusOK))
	p.WaitVisible(`[data-module="` + samplemodules.Sample + `"]`)
	Expect(p.TryAttribute(`[data-module="`+samplemodules.Sample+`"]`, "data-state")).To(Equal("Ready"))
	Expect(p.Text(`[data-module="`+samplemodules.Sample+`"]`)).To(ContainSubstring("Ready"), "in words too")
	p.Screenshot(filepath.Join(screenshots, "runtime.png"))

	Expect(p.Open(env.url + "/runtimes/" + kymaLost)).To(BeEquivalentTo(http.StatusOK))
	Expect(p.Text("body")).To(MatchRegexp(`(?i)unknown|stale`))
	p.Screenshot(filepath.Join(screenshots, "runtime-unreachable.png"))

	Expect(p.Open(env.url + "/modules/" + samplemodules.Evolving)).To(BeEquivalentTo(http.StatusOK))
	body := p.Text("body")
	Expect(body).To(ContainSubstring("fast"))
	Expect(body).To(ContainSubstring("2.0.0"))
	Expect(p.Text(`tr[data-module="evolving"][data-version="1.0.0"] td:nth-child(2)`)).To(Equal("1"), "one runtime, kyma-b, runs evolving 1.0.0")
	p.Screenshot(filepath.Join(screenshots, "module.png"))

	for _, page := range []string{"rollouts", "backups"} {
		Expect(p.Open(env.url + "/" + page)).To(BeEquivalentTo(http.StatusOK))
		p.Screenshot(filepath.Join(screenshots, page+".png"))
	}
}

// (b) A module turning to Error inside a runtime reaches an open fleet
// page without a reload, and so does its recovery.
func TestStateChangeReachesAnOpenPage(t *testing.T) {
	RegisterTestingT(t)
	waitForFleet(t)
	p := open(t, env.fleetViewer)
	Expect(p.Open(env.url + "/")).To(BeEquivalentTo(http.StatusOK))
	p.WaitVisible(`#live[data-live="connected"]`)
	Eventually(func() (string, error) { return p.TryAttribute(row(kymaLive), "data-state") }, timeout, interval).Should(Equal("Ready"))
	// A reload would drop this; the page must still have it at the end.
	_, err := testbrowser.TryEval[bool](p, `window.notReloaded = true`)
	Expect(err).NotTo(HaveOccurred())
	address := p.URL()

	setSampleState(t, "Error")
	t.Cleanup(func() { setSampleState(t, "") })
	Eventually(func(g Gomega) {
		state, _ := kymaState(g, kymaLive)
		g.Expect(state).To(Equal(v1beta2.StateError))
		g.Expect(p.TryAttribute(row(kymaLive), "data-state")).To(Equal("Error"))
	}, timeout, interval).Should(Succeed())
	Expect(p.Text(row(kymaLive))).To(ContainSubstring("Error"), "the state is said in words too")
	p.Screenshot(filepath.Join(screenshots, "fleet-live-error.png"))

	setSampleState(t, "")
	Eventually(func() (string, error) { return p.TryAttribute(row(kymaLive), "data-state") }, timeout, interval).Should(Equal("Ready"))

	Expect(testbrowser.TryEval[bool](p, `window.notReloaded === true`)).To(BeTrue(), "the page was not reloaded")
	Expect(p.URL()).To(Equal(address))
}

// setSampleState makes the sample module's operator in runtime 1, where
// only kyma-live runs the sample module, report state for its Samples
// (Ready again when state is empty).
func setSampleState(t *testing.T, state string) {
	t.Helper()
	rt, err := dynamic.NewForConfig(env.rt[1].Config())
	Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	var samples []string
	Eventually(func(g Gomega) {
		list, err := rt.Resource(samplemodules.SampleResource).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Items).NotTo(BeEmpty(), "kyma-live's Sample is installed")
		samples = nil
		for _, s := range list.Items {
			samples = append(samples, s.GetNamespace()+"/"+s.GetName())
		}
	}, timeout, interval).Should(Succeed())
	value := "null"
	if state != "" {
		value = strconv.Quote(state)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, samplemodules.StateLabel, value)
	for _, s := range samples {
		namespace, name, _ := strings.Cut(s, "/")
		_, err := rt.Resource(samplemodules.SampleResource).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
}

// (c) An authenticated viewer who may list nothing in the namespace gets
// 403 on every page and sees no runtime, module or name of the fleet; a
// request without a token gets 401.
func TestViewerWithoutRightsSeesNothing(t *testing.T) {
	RegisterTestingT(t)
	waitForFleet(t)
	p := open(t, env.outsider)
	Expect(p.Open(env.url + "/")).To(BeEquivalentTo(http.StatusForbidden))
	Expect(p.Count(`tr[data-runtime]`)).To(BeZero())
	Expect(p.Text("body")).NotTo(BeEmpty(), "the 403 page says why")
	p.Screenshot(filepath.Join(screenshots, "forbidden.png"))

	for _, page := range append(pages, "/events") {
		status, body := get(t, env.outsider, page)
		Expect(status).To(Equal(http.StatusForbidden), page)
		for _, name := range []string{kymaA, kymaB, kymaLive, kymaLost} {
			Expect(body).NotTo(ContainSubstring(name), "%s shows an outsider the runtime %s", page, name)
		}
	}
	for _, page := range pages {
		status, body := get(t, "", page)
		Expect(status).To(Equal(http.StatusUnauthorized), page)
		Expect(body).NotTo(ContainSubstring(kymaA), page)
	}
}

// get fetches a page with net/http as the viewer of token (none when
// empty) and returns its status and body.
func get(t *testing.T, token, page string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.url+page, nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && page == "/events" {
		return resp.StatusCode, "" // a stream that never ends; read by TestNoResponseContainsSecretData
	}
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

// (d) No response of the console, to a viewer who may see the whole fleet,
// holds Secret data: not the marker of the Secrets next to the Kymas, nor
// a runtime's kubeconfig credentials; neither the pages, their scripts and
// fragments as the browser loaded them, nor the event stream.
func TestNoResponseContainsSecretData(t *testing.T) {
	RegisterTestingT(t)
	waitForFleet(t)
	stream := readEvents(t, env.fleetViewer)
	p := open(t, env.fleetViewer)
	var seen []string
	for _, page := range pages {
		Expect(p.Open(env.url+page)).To(BeEquivalentTo(http.StatusOK), page)
		p.WaitVisible("body")
		p.Bodies() // before the next page makes Chromium forget them
	}
	// Back on the fleet page, a change makes the console push events to
	// the page and to the stream read with net/http.
	Expect(p.Open(env.url + "/")).To(BeEquivalentTo(http.StatusOK))
	p.WaitVisible(`#live[data-live="connected"]`)
	touch(t, kymaA)
	Eventually(p.EventSourceMessages, timeout, interval).ShouldNot(BeEmpty(), "the page received the change")
	Eventually(stream.String, timeout, interval).Should(ContainSubstring("data:"), "the stream received the change")

	for _, r := range p.Bodies() {
		if !r.Kept { // e.g. the favicon: fetched again
			_, r.Body = get(t, env.fleetViewer, strings.TrimPrefix(r.URL, env.url))
		}
		seen = append(seen, r.URL+"\n"+r.Body)
	}
	seen = append(seen, p.EventSourceMessages()...)
	for _, page := range pages {
		_, body := get(t, env.fleetViewer, page)
		seen = append(seen, page+"\n"+body)
	}
	seen = append(seen, "/events\n"+stream.String())

	Expect(strings.Join(seen, "\n")).To(ContainSubstring(kymaA), "the responses checked hold the fleet")
	// The failure names the response and which secret, never the secret.
	for _, response := range seen {
		for i, secret := range env.secrets {
			Expect(strings.Contains(response, secret)).To(BeFalse(), "the response of %s holds Secret data (secret %d of %d: 0 is the marker, then the runtimes' credentials)",
				strings.SplitN(response, "\n", 2)[0], i, len(env.secrets))
		}
	}
}

// touch changes a Kyma's label, which the console's informers see.
func touch(t *testing.T, name string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"console-test/touched":%q}}}`, strconv.FormatInt(time.Now().UnixNano(), 10))
	kyma := &v1beta2.Kyma{}
	kyma.Name, kyma.Namespace = name, kcpNamespace
	Expect(env.kcp.Patch(context.Background(), kyma, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// eventStream collects what the console's /events sends, as sent.
type eventStream struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (s *eventStream) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// readEvents opens /events as the viewer of token and collects it until
// the test ends.
func readEvents(t *testing.T, token string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.url+"/events", nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by t.Cleanup, once the test has read the stream
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/event-stream"))
	s := &eventStream{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			s.mu.Lock()
			s.buf.WriteString(lines.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		<-done
	})
	return s
}

// (e) Without a mouse: Tab reaches the filter and then the runtimes'
// links, and Enter opens the runtime.
func TestKeyboardReachesFilterAndRuntimes(t *testing.T) {
	RegisterTestingT(t)
	waitForFleet(t)
	p := open(t, env.fleetViewer)
	Expect(p.Open(env.url + "/")).To(BeEquivalentTo(http.StatusOK))
	p.WaitVisible(row(kymaA))

	link := regexp.MustCompile(`href=/runtimes/` + kymaA + `\b`)
	var focused []string
	filter := false
	for range 60 {
		p.Press(testbrowser.Tab)
		f := p.Focused()
		focused = append(focused, f)
		filter = filter || strings.HasPrefix(f, "input") || strings.HasPrefix(f, "select")
		if link.MatchString(f) {
			break
		}
	}
	Expect(filter).To(BeTrue(), "Tab reaches a filter; focused in turn: %q", focused)
	Expect(focused[len(focused)-1]).To(MatchRegexp(link.String()), "Tab reaches kyma-a's link; focused in turn: %q", focused)

	p.Press(testbrowser.Enter)
	Eventually(p.URL, timeout, interval).Should(HaveSuffix("/runtimes/" + kymaA))
	p.WaitVisible(`[data-module="` + samplemodules.Sample + `"]`)
}

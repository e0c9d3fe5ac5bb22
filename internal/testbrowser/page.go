package testbrowser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// StepTimeout bounds each step of a Page (a navigation, a wait for an
// element, a screenshot): generous, since the machine may be loaded, yet a
// hung page fails the test instead of the package's timeout.
var StepTimeout = time.Minute

// Page is one tab of the browser, for one test. Its methods fail the test
// on error; the ones whose name starts with Try return the error instead,
// for use inside gomega's Eventually.
type Page struct {
	t      testing.TB
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	console  []string
	finished []Response
	// read are the first len(read) of finished, with their bodies.
	read     []Response
	messages []string
}

// Response is a response the page received, with its body (Bodies).
type Response struct {
	URL    string
	Status int64
	Body   string
	// Kept says whether Chromium kept the body; Body is empty when not.
	Kept bool
	id   network.RequestID
}

// NewPage opens a tab. headers are sent with every request of the tab,
// EventSource connections included (e.g. Authorization). The tab closes
// when the test ends; when the test failed, its log gets the page's console
// and Chromium's output.
func (b *Browser) NewPage(t testing.TB, headers map[string]string) *Page {
	t.Helper()
	p := &Page{t: t}
	responses := map[network.RequestID]Response{}
	p.ctx, p.cancel = chromedp.NewContext(b.ctx, chromedp.WithListener(func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			p.console = append(p.console, fmt.Sprintf("console.%s: %s", ev.Type, argsText(ev.Args)))
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil {
				text += " " + d.Exception.Description
			}
			p.console = append(p.console, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, text))
		case *network.EventResponseReceived:
			responses[ev.RequestID] = Response{URL: ev.Response.URL, Status: ev.Response.Status, id: ev.RequestID}
		case *network.EventLoadingFinished:
			if r, ok := responses[ev.RequestID]; ok {
				p.finished = append(p.finished, r)
			}
		case *network.EventEventSourceMessageReceived:
			p.messages = append(p.messages, ev.EventName+": "+ev.Data)
		}
	}))
	t.Cleanup(func() {
		if t.Failed() {
			p.mu.Lock()
			t.Logf("The page's console:\n%s", strings.Join(p.console, "\n"))
			p.mu.Unlock()
			t.Logf("Chromium's output:\n%s", b.Output())
		}
		p.cancel()
	})
	if err := firstRun(p.ctx, StepTimeout); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	extra := network.Headers{}
	for k, v := range headers {
		extra[k] = v
	}
	p.step("setting the tab's headers", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: extra})
		return err
	}))
	return p
}

func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if a.Value != nil {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

// step runs actions within StepTimeout and fails the test when they fail.
func (p *Page) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := p.try(actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *Page) try(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(p.ctx, StepTimeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Navigate loads url and waits until its document has loaded.
func (p *Page) Navigate(url string) {
	p.t.Helper()
	p.step("navigating to "+url, chromedp.Navigate(url))
}

// Open loads url like Navigate and returns the HTTP status of its
// document, for pages whose status matters (a 403, a 401).
func (p *Page) Open(url string) int64 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, StepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(url))
	if err != nil {
		p.t.Fatalf("opening %s: %v", url, err)
	}
	if resp == nil {
		p.t.Fatalf("opening %s: no response", url)
	}
	return resp.Status
}

// WaitVisible waits until an element matching the CSS selector is visible.
func (p *Page) WaitVisible(selector string) {
	p.t.Helper()
	p.step("waiting for "+selector, chromedp.WaitVisible(chromedp.CSS(selector)))
}

// Text is the visible text of the first element matching the CSS selector,
// once it is visible.
func (p *Page) Text(selector string) string {
	p.t.Helper()
	var text string
	p.step("reading the text of "+selector, chromedp.WaitVisible(chromedp.CSS(selector)), func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		var err error
		text, err = chromedp.Text(chromedp.CSS(selector))(ctx, t)
		return chromedp.Void{}, err
	})
	return text
}

// TryEval evaluates a JavaScript expression in the page and decodes its
// JSON value into T, without waiting for anything: for Eventually.
func TryEval[T any](p *Page, expression string) (T, error) {
	ctx, cancel := context.WithTimeout(p.ctx, StepTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expression))
}

// TryAttribute is the attribute of the first element matching the CSS
// selector as the page has it now, "" when there is no such element or
// attribute: it does not wait, so Eventually can poll it.
func (p *Page) TryAttribute(selector, name string) (string, error) {
	return TryEval[string](p, fmt.Sprintf(`(document.querySelector(%s)?.getAttribute(%s)) ?? ""`, quote(selector), quote(name)))
}

// Count is how many elements match the CSS selector now.
func (p *Page) Count(selector string) int {
	p.t.Helper()
	n, err := TryEval[int](p, fmt.Sprintf(`document.querySelectorAll(%s).length`, quote(selector)))
	if err != nil {
		p.t.Fatalf("counting %s: %v", selector, err)
	}
	return n
}

// Focused describes the element that has the keyboard focus: its tag, id,
// href and text, e.g. `a href=/runtimes/kyma-a "kyma-a"`.
func (p *Page) Focused() string {
	p.t.Helper()
	s, err := TryEval[string](p, `(() => { const e = document.activeElement; if (!e) return ""; `+
		`let d = e.tagName.toLowerCase(); if (e.id) d += " id=" + e.id; `+
		`if (e.getAttribute("href")) d += " href=" + e.getAttribute("href"); `+
		`return d + " " + JSON.stringify((e.innerText || e.value || "").trim().slice(0, 60)); })()`)
	if err != nil {
		p.t.Fatalf("reading the focused element: %v", err)
	}
	return s
}

// Press sends keys to the focused element, as a user typing: kb.Tab,
// kb.Enter, or text.
func (p *Page) Press(keys string) {
	p.t.Helper()
	p.step(fmt.Sprintf("pressing %q", keys), chromedp.KeyEvent(keys))
}

// Tab and Enter are the keys of keyboard navigation, for Press.
const (
	Tab   = kb.Tab
	Enter = kb.Enter
)

// URL is the page's current address.
func (p *Page) URL() string {
	p.t.Helper()
	u, err := TryEval[string](p, `location.href`)
	if err != nil {
		p.t.Fatalf("reading the page's address: %v", err)
	}
	return u
}

// Screenshot saves a PNG of the whole page (beyond the window, too) at
// path, creating its directory.
func (p *Page) Screenshot(path string) {
	p.t.Helper()
	var png []byte
	p.step("taking a screenshot", func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		var err error
		png, err = chromedp.FullScreenshot(100)(ctx, t)
		return chromedp.Void{}, err
	})
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// Bodies are the bodies of every response the page has finished loading
// so far (documents, scripts, styles, fetches), oldest first. Chromium
// forgets a document's resources when the tab navigates away: call it
// before leaving a page whose responses matter. It reads each body once
// and keeps it, so later calls return the earlier pages' bodies too.
func (p *Page) Bodies() []Response {
	p.t.Helper()
	p.mu.Lock()
	unread := p.finished[len(p.read):]
	p.mu.Unlock()
	for _, r := range unread {
		// Chromium keeps no body of some requests of its own (the
		// favicon's): those come back with Kept false, for the caller to
		// fetch again if it must see them.
		err := p.try(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			res, err := cdp.Call(ctx, t, network.GetResponseBody, network.GetResponseBodyParams{RequestID: r.id})
			r.Body, r.Kept = string(res.Body), err == nil
			return err
		}))
		if err != nil && !strings.Contains(err.Error(), "No resource with given identifier") {
			p.t.Fatalf("reading the body of %s: %v", r.URL, err)
		}
		p.read = append(p.read, r)
	}
	return append([]Response(nil), p.read...)
}

// EventSourceMessages are the server-sent events the page's EventSources
// have received so far, each as "event: data"; an event stream never
// finishes loading, so its content is seen here, not in Responses.
func (p *Page) EventSourceMessages() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.messages...)
}

// quote makes s a JavaScript string literal.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

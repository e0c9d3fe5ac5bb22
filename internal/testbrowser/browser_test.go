package testbrowser

import (
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var browser *Browser

func TestMain(m *testing.M) {
	var err error
	if browser, err = Start(Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	browser.Close()
	os.Exit(code)
}

// page is a document whose script changes an attribute when the server
// sends an event, links reachable by keyboard, and a header the server
// echoes, which together exercise every helper of Page.
const page = `<!doctype html><html><body>
<input id="filter" placeholder="filter"><a id="first" href="/next">next</a>
<p id="who">%s</p><span id="live" data-live="disconnected">waiting</span>
<script>
const es = new EventSource("/events");
es.onmessage = (e) => { const l = document.getElementById("live"); l.dataset.live = e.data; l.textContent = e.data; };
</script></body></html>`

// server serves page; its event stream sends its one event when the test
// writes to release.
func server(t *testing.T) (srv *httptest.Server, release chan<- struct{}) {
	sent := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, page, r.Header.Get("X-Viewer"))
	})
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<p id="arrived">arrived</p>`)
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		// The event waits for the test's word, so the page is seen in
		// its first state before the event changes it.
		select {
		case <-sent:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: connected\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections)
	return srv, sent
}

func TestPageReadsWaitsTypesAndShoots(t *testing.T) {
	g := NewWithT(t)
	srv, release := server(t)
	p := browser.NewPage(t, map[string]string{"X-Viewer": "alice"})

	g.Expect(p.Open(srv.URL)).To(BeEquivalentTo(http.StatusOK))
	g.Expect(p.Text("#who")).To(Equal("alice"), "the extra header reaches the server")
	g.Expect(p.TryAttribute("#live", "data-live")).To(Equal("disconnected"))
	g.Expect(p.TryAttribute("#missing", "data-live")).To(BeEmpty())
	g.Expect(p.Count("a")).To(Equal(1))

	release <- struct{}{}
	g.Eventually(func() (string, error) { return p.TryAttribute("#live", "data-live") }, 30*time.Second).Should(Equal("connected"))
	g.Expect(p.EventSourceMessages()).To(ContainElement("message: connected"))

	var bodies []string
	for _, r := range p.Bodies() {
		if strings.HasSuffix(r.URL, "/") {
			bodies = append(bodies, r.Body)
		}
	}
	g.Expect(bodies).To(ContainElement(ContainSubstring(`<p id="who">alice</p>`)))

	shot := filepath.Join(t.TempDir(), "page.png")
	p.Screenshot(shot)
	f, err := os.Open(shot)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	img, err := png.Decode(f)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img.Bounds().Dx()).To(Equal(1280))

	p.Press(Tab)
	g.Expect(p.Focused()).To(HavePrefix("input id=filter"))
	p.Press(Tab)
	g.Expect(p.Focused()).To(Equal(`a id=first href=/next "next"`))
	p.Press(Enter)
	p.WaitVisible("#arrived")
	g.Expect(p.URL()).To(Equal(srv.URL + "/next"))
}

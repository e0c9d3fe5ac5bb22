// Package testbrowser runs Debian's headless Chromium for browser tests and
// drives it with chromedp: one browser per test package (start it in
// TestMain), one tab per test, every step bounded by a timeout, and
// Chromium's own output plus the page's console and exceptions in the log of
// a test that fails, so a failure in CI can be understood without a rerun.
package testbrowser

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// DefaultPath is where Debian's chromium package puts the browser; `make
// chromium` installs it.
const DefaultPath = "/usr/bin/chromium"

// startTimeout bounds Chromium's start: a loaded two-core machine starts
// it in seconds, and a browser that has not started by then will not.
const startTimeout = 2 * time.Minute

// Browser is one headless Chromium, shared by the tests of a package.
type Browser struct {
	ctx         context.Context
	cancel      context.CancelFunc
	userDataDir string
	output      *syncBuffer
}

// Options tune Start; the zero value runs DefaultPath.
type Options struct {
	// Path is Chromium's executable, DefaultPath when empty; the
	// environment variable CHROMIUM overrides both.
	Path string
	// Width and Height are the window's size in pixels, which is also the
	// size of screenshots (1280×900 when zero).
	Width, Height int
}

// Start starts Chromium with the flags that work on a machine without a
// network (no background connections, updates or sync, which it otherwise
// tries many at a time and logs failures of) and a new empty profile, and
// waits until it answers. Close stops it.
func Start(opts Options) (*Browser, error) {
	path := opts.Path
	if env := os.Getenv("CHROMIUM"); env != "" {
		path = env
	}
	if path == "" {
		path = DefaultPath
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the browser tests need Chromium at %s (install Debian's packages chromium and chromium-driver: `make chromium` does as root, or set CHROMIUM to its path): %w", path, err)
	}
	if opts.Width == 0 || opts.Height == 0 {
		opts.Width, opts.Height = 1280, 900
	}
	dir, err := os.MkdirTemp("", "testbrowser-profile-")
	if err != nil {
		return nil, err
	}
	output := &syncBuffer{}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root in CI, where the sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(opts.Width, opts.Height),
		chromedp.CombinedOutput(output),
	)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	b := &Browser{ctx: ctx, userDataDir: dir, output: output, cancel: func() {
		cancelBrowser()
		cancelAlloc()
	}}
	if err := firstRun(ctx, startTimeout); err != nil {
		b.Close()
		return nil, fmt.Errorf("starting %s: %w; its output:\n%s", path, err, output.String())
	}
	return b, nil
}

// Close stops the browser and removes its profile.
func (b *Browser) Close() {
	b.cancel()
	_ = os.RemoveAll(b.userDataDir)
}

// Output is what Chromium has written to stdout and stderr so far, but for
// its complaints about the missing D-Bus, which a machine without a desktop
// session makes by the dozen and which say nothing about a test.
func (b *Browser) Output() string {
	var kept []string
	for line := range strings.Lines(b.output.String()) {
		if !strings.Contains(line, "/dbus/") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// syncBuffer collects Chromium's output, which its process writes while
// tests read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// firstRun starts what a chromedp context stands for (the browser, or a
// tab), which then lives as long as the context of that first run: so the
// start is bounded by a timer, not by a deadline of its context, which would
// close the browser or tab when it passes.
func firstRun(ctx context.Context, timeout time.Duration) error {
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-started:
		return err
	case <-timer.C:
		return fmt.Errorf("not started within %s", timeout)
	}
}

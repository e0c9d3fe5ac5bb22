package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Defaults of HelmLimits.
const (
	// DefaultRenderDeadline is long for a real chart (they render in
	// milliseconds) and short enough that a looping template surfaces
	// as an Error soon.
	DefaultRenderDeadline = 10 * time.Second
	// DefaultMaxOutputBytes bounds a chart's rendered templates: many times
	// what real module charts render.
	DefaultMaxOutputBytes int64 = 32 << 20
	// DefaultMaxConcurrentRenders bounds the renders running at once.
	DefaultMaxConcurrentRenders = 4
	// rememberedTimeouts bounds how many timed-out renders are remembered.
	rememberedTimeouts = 1024
)

// HelmLimits bound rendering charts. Zero fields take the defaults.
type HelmLimits struct {
	// Deadline bounds one render.
	Deadline time.Duration
	// MaxOutputBytes bounds a chart's rendered templates together.
	MaxOutputBytes int64
	// MaxConcurrent bounds the renders running at once, those that went
	// past their deadline and still run included.
	MaxConcurrent int
}

// HelmRenderer renders charts within a deadline, without letting charts
// that never finish pile up. It is safe for concurrent use; share one.
//
// Helm's engine (text/template) cannot be cancelled: a template that loops
// runs until it is done, which may be never. So a render runs in its own
// goroutine and the caller stops waiting at the deadline, with an error.
// The render itself keeps running and keeps its slot: at most MaxConcurrent
// renders run at once, so runaway charts cannot multiply and use more than
// that many cores. A chart and values that went past the deadline are
// remembered and refused at once from then on, so that retrying the
// Manifest does not start the same runaway render again. The price: until
// a runaway render ends (or the operator restarts), it holds a slot and a
// core; when every slot is held so, charts wait for a slot until their
// deadline and fail, while raw manifests are unaffected.
type HelmRenderer struct {
	limits HelmLimits
	slots  chan struct{}

	mu       sync.Mutex
	timedOut map[string]time.Duration

	// started counts renders started, for tests.
	started func()
}

// NewHelmRenderer returns a renderer with the given limits.
func NewHelmRenderer(limits HelmLimits) *HelmRenderer {
	if limits.Deadline <= 0 {
		limits.Deadline = DefaultRenderDeadline
	}
	if limits.MaxOutputBytes <= 0 {
		limits.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if limits.MaxConcurrent <= 0 {
		limits.MaxConcurrent = DefaultMaxConcurrentRenders
	}
	return &HelmRenderer{
		limits:   limits,
		slots:    make(chan struct{}, limits.MaxConcurrent),
		timedOut: map[string]time.Duration{},
	}
}

type renderResult struct {
	objs []*unstructured.Unstructured
	err  error
}

// Render renders a packaged chart as HelmChart does, within the limits.
func (r *HelmRenderer) Render(ctx context.Context, archive []byte, opts HelmOptions) ([]*unstructured.Unstructured, error) {
	opts.MaxOutputBytes = r.limits.MaxOutputBytes
	key, err := renderKey(archive, opts)
	if err != nil {
		return nil, err
	}
	if deadline, ok := r.remembered(key); ok {
		return nil, &RenderTimeoutError{Deadline: deadline, Remembered: true}
	}

	timer := time.NewTimer(r.limits.Deadline)
	defer timer.Stop()
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to render the Helm chart: %w", ctx.Err())
	case <-timer.C:
		return nil, fmt.Errorf("no Helm render slot came free within %s: all %d are busy, possibly with charts that do not finish (--helm-max-concurrent-renders)", r.limits.Deadline, r.limits.MaxConcurrent)
	}
	timer.Reset(r.limits.Deadline)

	done := make(chan renderResult, 1)
	if r.started != nil {
		r.started()
	}
	go func() {
		defer func() { <-r.slots }()
		defer func() {
			// A chart must not take the operator down with it.
			if p := recover(); p != nil {
				done <- renderResult{err: fmt.Errorf("rendering the Helm chart panicked: %v", p)}
			}
		}()
		objs, err := HelmChart(archive, opts)
		done <- renderResult{objs: objs, err: err}
	}()
	select {
	case res := <-done:
		return res.objs, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("rendering the Helm chart: %w", ctx.Err())
	case <-timer.C:
		r.remember(key)
		return nil, &RenderTimeoutError{Deadline: r.limits.Deadline}
	}
}

// RenderTimeoutError is a chart that did not finish rendering within the
// deadline, now or (Remembered) on an earlier attempt: it is not rendered
// again until the chart or its values change. Typed so that status can say
// so in a stable sentence.
type RenderTimeoutError struct {
	Deadline   time.Duration
	Remembered bool
}

func (e *RenderTimeoutError) Error() string {
	if e.Remembered {
		return fmt.Sprintf("rendering the Helm chart did not finish within %s before (a template that loops?); it is not rendered again until the chart or its values change", e.Deadline)
	}
	return fmt.Sprintf("rendering the Helm chart did not finish within %s (--helm-render-deadline); a template that loops? It is not rendered again until the chart or its values change", e.Deadline)
}

func (r *HelmRenderer) remembered(key string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.timedOut[key]
	return d, ok
}

func (r *HelmRenderer) remember(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.timedOut) >= rememberedTimeouts {
		// Forget an arbitrary one: the map must stay bounded, and a
		// forgotten chart costs one more render slot at worst.
		for k := range r.timedOut {
			delete(r.timedOut, k)
			break
		}
	}
	r.timedOut[key] = r.limits.Deadline
}

// renderKey identifies a render: the chart's bytes and everything it is
// rendered with.
func renderKey(archive []byte, opts HelmOptions) (string, error) {
	params, err := json.Marshal(struct {
		Release, Namespace, KubeVersion string
		Values                          any
	}{opts.ReleaseName, opts.Namespace, opts.KubeVersion, opts.Values})
	if err != nil {
		return "", fmt.Errorf("values: %w", err)
	}
	chartSum := sha256.Sum256(archive)
	sum := sha256.Sum256(append(chartSum[:], params...))
	return hex.EncodeToString(sum[:]), nil
}

package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
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
	// DefaultMaxRenderMemoryBytes bounds what one render may map on top of
	// what its process maps as it starts (~120 MiB of VmData, ~65 MiB of
	// RSS for the operator's binary). Real charts render in a few MiB;
	// 4 renders of (65 + 256) MiB fit beside the operator in the 2 GiB
	// that config/manager gives its container.
	DefaultMaxRenderMemoryBytes int64 = 256 << 20
	// MinRenderMemoryBytes is the least budget that renders a small chart
	// reliably: below it, even good charts would be stopped, and each
	// refusal kept in status.
	MinRenderMemoryBytes int64 = 64 << 20
	// rememberedRefusals bounds how many refused renders are remembered.
	rememberedRefusals = 1024
)

// HelmLimits bound rendering charts. Zero fields take the defaults.
type HelmLimits struct {
	// Deadline bounds one render, from when its process has read the
	// chart.
	Deadline time.Duration
	// MaxOutputBytes bounds a chart's rendered templates together, and the
	// objects a render process sends back.
	MaxOutputBytes int64
	// MaxMemoryBytes bounds the memory one render process maps on top of
	// what it maps as it starts.
	MaxMemoryBytes int64
	// MaxConcurrent bounds the renders running at once.
	MaxConcurrent int
}

// HelmRenderer renders charts within a deadline and a memory budget, each
// in a child process that is killed when it goes over either or sends more
// than the output limit. It is safe for concurrent use; share one.
//
// Helm's engine (text/template) cannot be cancelled, and a template can
// loop or allocate gigabytes ({{ repeat 3000000000 "x" }}). In a goroutine
// of the operator, such a render would run on after its deadline, holding
// a core, or take the operator down with it. A process can be killed: a
// render over its budget ends at once and frees its slot, and the
// operator's memory never holds more than the output limit of a chart.
// The price is a process start per render (tens of milliseconds), which
// only content that changed pays: unchanged content is not rendered again.
//
// A render stopped at a limit is refused at once from then on, without a
// process, until the chart, its values or that limit change: the refusal
// is remembered here, for every Manifest with the same chart and values,
// and in the Manifest's status (RefusedError.Refusal, passed back to
// Render), so that a restart does not render it again either.
type HelmRenderer struct {
	limits HelmLimits
	slots  chan struct{}

	mu      sync.Mutex
	refused map[string]v1beta2.RenderRefusal

	// started is told the process id of each render process, for tests.
	started func(pid int)
}

// NewHelmRenderer returns a renderer with the given limits.
func NewHelmRenderer(limits HelmLimits) *HelmRenderer {
	if limits.Deadline <= 0 {
		limits.Deadline = DefaultRenderDeadline
	}
	if limits.MaxOutputBytes <= 0 {
		limits.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if limits.MaxMemoryBytes <= 0 {
		limits.MaxMemoryBytes = DefaultMaxRenderMemoryBytes
	}
	if limits.MaxConcurrent <= 0 {
		limits.MaxConcurrent = DefaultMaxConcurrentRenders
	}
	return &HelmRenderer{
		limits:  limits,
		slots:   make(chan struct{}, limits.MaxConcurrent),
		refused: map[string]v1beta2.RenderRefusal{},
	}
}

// Render renders a packaged chart as HelmChart does, within the limits, in
// a render process of this binary (see ServeIfRenderProcess). recorded is
// the refusal the Manifest's status keeps, if any: when it is for the same
// chart, values and limit, the render is refused at once.
func (r *HelmRenderer) Render(ctx context.Context, archive []byte, opts HelmOptions, recorded *v1beta2.RenderRefusal) ([]*unstructured.Unstructured, error) {
	opts.MaxOutputBytes = r.limits.MaxOutputBytes
	digest, err := renderDigest(archive, opts)
	if err != nil {
		return nil, err
	}
	if refusal, ok := r.refusal(digest, recorded); ok {
		return nil, &RefusedError{Refusal: refusal, Before: true}
	}
	if !servesRenders.Load() {
		return nil, ErrNoRenderProcess
	}

	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to render the Helm chart: %w", ctx.Err())
	}
	defer func() { <-r.slots }()
	objs, err := r.renderInProcess(ctx, archive, opts)
	if refused := (*RefusedError)(nil); errors.As(err, &refused) {
		refused.Refusal.Digest = digest
		refused.Refusal.Limit = r.limit(refused.Refusal.Reason)
		r.remember(refused.Refusal)
	}
	return objs, err
}

// RefusedError is a render stopped at a limit, now or (Before) on an
// earlier attempt with the same chart, values and limit: it is not rendered
// again until one of them changes. Refusal is what the Manifest's status
// keeps.
type RefusedError struct {
	Refusal v1beta2.RenderRefusal
	// Before is true when nothing was rendered now.
	Before bool
	// detail says what was seen when the render was stopped.
	detail string
}

func (e *RefusedError) Error() string {
	if e.Before {
		return fmt.Sprintf("the Helm chart is not rendered: a render of the same chart and values was stopped before, as it %s. It is rendered again when the chart, its values or that limit change",
			overLimit(e.Refusal.Reason, e.Refusal.Limit))
	}
	return fmt.Sprintf("rendering the Helm chart was stopped: %s. It is not rendered again until the chart, its values or that limit change", e.detail)
}

// overLimit says which limit a render went over, naming its flag.
func overLimit(reason v1beta2.RenderRefusalReason, limit string) string {
	switch reason {
	case v1beta2.RenderRefusalDeadline:
		return fmt.Sprintf("did not finish within %s (--helm-render-deadline)", limit)
	case v1beta2.RenderRefusalMemory:
		return fmt.Sprintf("needed more than %s of memory (--helm-max-render-memory-bytes)", limit)
	default:
		return fmt.Sprintf("rendered more than %s (--helm-max-output-bytes)", limit)
	}
}

// limit is the value of the limit behind reason, as a refusal keeps it.
func (r *HelmRenderer) limit(reason v1beta2.RenderRefusalReason) string {
	switch reason {
	case v1beta2.RenderRefusalDeadline:
		return r.limits.Deadline.String()
	case v1beta2.RenderRefusalMemory:
		return resource.NewQuantity(r.limits.MaxMemoryBytes, resource.BinarySI).String()
	default:
		return resource.NewQuantity(r.limits.MaxOutputBytes, resource.BinarySI).String()
	}
}

// refusal finds a refusal of the render digest under the current limits:
// the Manifest's own, else one remembered from another Manifest.
func (r *HelmRenderer) refusal(digest string, recorded *v1beta2.RenderRefusal) (v1beta2.RenderRefusal, bool) {
	if recorded != nil && recorded.Digest == digest && recorded.Limit == r.limit(recorded.Reason) {
		return *recorded, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	refusal, ok := r.refused[digest]
	if !ok || refusal.Limit != r.limit(refusal.Reason) {
		return v1beta2.RenderRefusal{}, false
	}
	return refusal, true
}

func (r *HelmRenderer) remember(refusal v1beta2.RenderRefusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refused) >= rememberedRefusals {
		// Forget an arbitrary one: the map must stay bounded, and a
		// forgotten chart costs one more bounded render at worst.
		for k := range r.refused {
			delete(r.refused, k)
			break
		}
	}
	r.refused[refusal.Digest] = refusal
}

// renderDigest identifies a render: the chart's bytes and everything it is
// rendered with.
func renderDigest(archive []byte, opts HelmOptions) (string, error) {
	params, err := json.Marshal(struct {
		Release, Namespace, KubeVersion string
		Values                          any
	}{opts.ReleaseName, opts.Namespace, opts.KubeVersion, opts.Values})
	if err != nil {
		return "", fmt.Errorf("values: %w", err)
	}
	chartSum := sha256.Sum256(archive)
	sum := sha256.Sum256(append(chartSum[:], params...))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

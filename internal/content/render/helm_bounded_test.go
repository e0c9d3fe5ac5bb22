package render_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// Templates that go over each limit. None of them ends on its own within
// the test's life, so a render that returns was stopped.
const (
	// endlessTemplate loops 10^12 times: hours of Helm's engine.
	endlessTemplate = `{{- range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}`
	// hugeStringTemplate asks for one 3 GB string at once.
	hugeStringTemplate = `{{ repeat 3000000000 "x" }}`
	// hoardingTemplate keeps 100 KB more on every turn of a loop, 10 GB
	// in all.
	hoardingTemplate = `{{ $d := dict }}{{ range $i := until 100000 }}{{ $_ := set $d (toString $i) (repeat 100000 "x") }}{{ end }}`
	// garbageTemplate makes 1 GB of strings in a loop and keeps none of
	// them: more than a render's memory budget in all, but never at once.
	garbageTemplate = `{{ range until 1000 }}{{ $_ := repeat 1000000 "x" }}{{ end }}`
)

func chartWith(t *testing.T, file, template string) []byte {
	t.Helper()
	files := maps.Clone(sampleChart())
	files[file] = template
	return packageChart(t, files)
}

func TestHelmRendererLimits(t *testing.T) {
	good := packageChart(t, sampleChart())
	tests := []struct {
		name    string
		limits  render.HelmLimits
		archive []byte
		// want is in the error; reason, when set, is the refusal's.
		want   string
		reason v1beta2.RenderRefusalReason
		limit  string
	}{
		{name: "a template that never ends", limits: render.HelmLimits{Deadline: 100 * time.Millisecond},
			archive: chartWith(t, "templates/loop.yaml", endlessTemplate),
			want:    "rendering the Helm chart was stopped: it did not finish within 100ms (--helm-render-deadline)",
			reason:  v1beta2.RenderRefusalDeadline, limit: "100ms"},
		{name: "output above the cap", limits: render.HelmLimits{MaxOutputBytes: 10 << 10},
			archive: chartWith(t, "templates/big.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {big: {{ repeat 20000 \"x\" }}}\n"),
			want:    "its templates render 20655 bytes, the limit is 10240 (--helm-max-output-bytes)",
			reason:  v1beta2.RenderRefusalOutput, limit: "10Ki"},
		{name: "objects above the cap, templates below", limits: render.HelmLimits{MaxOutputBytes: 10 << 10},
			// 6,000 bytes of YAML (~,) are 15,000 of JSON (null,).
			archive: chartWith(t, "templates/big.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: [{{ range until 3000 }}~,{{ end }}~]\n"),
			want:    "the objects it renders are more than 10240 bytes (--helm-max-output-bytes)",
			reason:  v1beta2.RenderRefusalOutput, limit: "10Ki"},
		{name: "one huge string", limits: render.HelmLimits{Deadline: time.Minute},
			archive: chartWith(t, "templates/huge.yaml", hugeStringTemplate),
			want:    "rendering the Helm chart was stopped: it needed more than 256Mi of memory (--helm-max-render-memory-bytes)",
			reason:  v1beta2.RenderRefusalMemory, limit: "256Mi"},
		{name: "a template that keeps allocating", limits: render.HelmLimits{Deadline: time.Minute, MaxMemoryBytes: 128 << 20},
			archive: chartWith(t, "templates/hoard.yaml", hoardingTemplate),
			want:    "it needed more than 128Mi of memory (--helm-max-render-memory-bytes)",
			reason:  v1beta2.RenderRefusalMemory, limit: "128Mi"},
		{name: "a template that fails is no refusal", limits: render.HelmLimits{Deadline: time.Minute},
			archive: chartWith(t, "templates/broken.yaml", `{{ fail "broken on purpose" }}`),
			want:    "broken on purpose"},
		{name: "garbage is not held against a chart", limits: render.HelmLimits{Deadline: time.Minute, MaxMemoryBytes: 128 << 20},
			archive: chartWith(t, "templates/garbage.yaml", garbageTemplate)},
		{name: "a good chart", limits: render.HelmLimits{Deadline: time.Minute, MaxOutputBytes: 1 << 20}, archive: good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := render.NewHelmRenderer(tt.limits).Render(context.Background(), tt.archive, render.HelmOptions{ReleaseName: "sample"}, nil)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				want, err := render.HelmChart(tt.archive, render.HelmOptions{ReleaseName: "sample"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(objs).To(Equal(want), "the render process gives what HelmChart gives")
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			var refused *render.RefusedError
			if tt.reason == "" {
				g.Expect(errors.As(err, &refused)).To(BeFalse(), "no refusal: %v", err)
				return
			}
			g.Expect(errors.As(err, &refused)).To(BeTrue())
			g.Expect(refused.Refusal.Reason).To(Equal(tt.reason))
			g.Expect(refused.Refusal.Limit).To(Equal(tt.limit))
			g.Expect(refused.Refusal.Digest).To(MatchRegexp("^sha256:[0-9a-f]{64}$"))
			g.Expect(refused.Before).To(BeFalse())
		})
	}
}

// startedProcesses records the render processes a renderer starts.
type startedProcesses struct {
	mu   sync.Mutex
	pids []int
}

func watchStarts(r *render.HelmRenderer) *startedProcesses {
	s := &startedProcesses{}
	render.SetStartedHook(r, func(pid int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pids = append(s.pids, pid)
	})
	return s
}

func (s *startedProcesses) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pids)
}

func (s *startedProcesses) last() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pids[len(s.pids)-1]
}

func TestRefusedRenderIsNotStartedAgain(t *testing.T) {
	g := NewWithT(t)
	// A leaked slot would make a later render wait: the context turns
	// that into a failure instead of a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	limits := render.HelmLimits{Deadline: 100 * time.Millisecond, MaxConcurrent: 1}
	r := render.NewHelmRenderer(limits)
	started := watchStarts(r)
	endless := chartWith(t, "templates/loop.yaml", endlessTemplate)
	opts := render.HelmOptions{ReleaseName: "sample", Values: &runtime.RawExtension{Raw: []byte(`{"replicas":2}`)}}

	_, err := r.Render(ctx, endless, opts, nil)
	var refused *render.RefusedError
	g.Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("did not finish within 100ms (--helm-render-deadline)")))
	g.Expect(started.count()).To(Equal(1))
	_, statErr := os.Stat("/proc/" + strconv.Itoa(started.last()))
	g.Expect(os.IsNotExist(statErr)).To(BeTrue(), "the render process is gone, not left running: %v", statErr)

	_, err = r.Render(ctx, endless, opts, nil)
	g.Expect(err).To(MatchError("the Helm chart is not rendered: a render of the same chart and values was stopped before, as it did not finish within 100ms (--helm-render-deadline). It is rendered again when the chart, its values or that limit change"))
	g.Expect(started.count()).To(Equal(1), "the same chart and values are refused without a render")

	// A restarted operator knows the refusal from the Manifest's status.
	restarted := render.NewHelmRenderer(limits)
	restartedStarts := watchStarts(restarted)
	recorded := refused.Refusal
	_, err = restarted.Render(ctx, endless, opts, &recorded)
	g.Expect(err).To(MatchError(ContainSubstring("was stopped before, as it did not finish within 100ms")))
	g.Expect(restartedStarts.count()).To(BeZero(), "the recorded refusal is enough")

	// The killed renders freed the only slot: a good chart renders.
	objs, err := restarted.Render(ctx, packageChart(t, sampleChart()), render.HelmOptions{ReleaseName: "sample"}, &recorded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(3))
	g.Expect(restartedStarts.count()).To(Equal(1))

	opts.Values = &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}
	_, err = r.Render(ctx, endless, opts, &recorded)
	g.Expect(err).To(MatchError(ContainSubstring("rendering the Helm chart was stopped: it did not finish within 100ms")))
	g.Expect(started.count()).To(Equal(2), "new values are a new render")

	// A longer deadline renders the chart again: the refusal was for 100ms.
	longer := render.NewHelmRenderer(render.HelmLimits{Deadline: 200 * time.Millisecond, MaxConcurrent: 1})
	longerStarts := watchStarts(longer)
	_, err = longer.Render(ctx, endless, render.HelmOptions{ReleaseName: "sample", Values: &runtime.RawExtension{Raw: []byte(`{"replicas":2}`)}}, &recorded)
	g.Expect(err).To(MatchError(ContainSubstring("it did not finish within 200ms")))
	g.Expect(longerStarts.count()).To(Equal(1))
}

// A binary that does not serve render processes says so instead of
// starting itself.
func TestRenderWithoutServingRenderProcesses(t *testing.T) {
	g := NewWithT(t)
	restore := render.SetServesRenders(false)
	defer restore()
	r := render.NewHelmRenderer(render.HelmLimits{})
	started := watchStarts(r)
	_, err := r.Render(context.Background(), packageChart(t, sampleChart()), render.HelmOptions{ReleaseName: "sample"}, nil)
	g.Expect(err).To(MatchError(render.ErrNoRenderProcess))
	g.Expect(err.Error()).To(ContainSubstring("render.ServeIfRenderProcess()"))
	g.Expect(started.count()).To(BeZero())
}

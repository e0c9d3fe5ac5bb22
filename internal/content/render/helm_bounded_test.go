package render_test

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// loopingTemplate keeps Helm's engine busy for seconds (2*10^7 iterations
// of ~150 ns) and renders nothing: a template that loops, as far as any
// deadline below is concerned, that still ends before the test binary does.
const loopingTemplate = `{{- range until 20000 }}{{ range until 1000 }}{{ end }}{{ end }}`

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
		want    string
	}{
		{name: "a template that loops", limits: render.HelmLimits{Deadline: 100 * time.Millisecond},
			archive: chartWith(t, "templates/loop.yaml", loopingTemplate),
			want:    "rendering the Helm chart did not finish within 100ms (--helm-render-deadline)"},
		{name: "output above the cap", limits: render.HelmLimits{MaxOutputBytes: 10 << 10},
			archive: chartWith(t, "templates/big.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {big: {{ repeat 20000 \"x\" }}}\n"),
			want:    "its templates render 20655 bytes, the limit is 10240 (--helm-max-output-bytes)"},
		{name: "a good chart", limits: render.HelmLimits{Deadline: time.Minute, MaxOutputBytes: 1 << 20}, archive: good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := render.NewHelmRenderer(tt.limits).Render(context.Background(), tt.archive, render.HelmOptions{ReleaseName: "sample"})
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				want, err := render.HelmChart(tt.archive, render.HelmOptions{ReleaseName: "sample"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(objs).To(Equal(want))
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestTimedOutRenderIsNotStartedAgain(t *testing.T) {
	g := NewWithT(t)
	r := render.NewHelmRenderer(render.HelmLimits{Deadline: 100 * time.Millisecond, MaxConcurrent: 2})
	var started atomic.Int32
	render.SetStartedHook(r, func() { started.Add(1) })
	looping := chartWith(t, "templates/loop.yaml", loopingTemplate)
	opts := render.HelmOptions{ReleaseName: "sample", Values: &runtime.RawExtension{Raw: []byte(`{"replicas":2}`)}}

	_, err := r.Render(context.Background(), looping, opts)
	g.Expect(err).To(MatchError(ContainSubstring("did not finish within 100ms")))
	g.Expect(started.Load()).To(Equal(int32(1)))

	_, err = r.Render(context.Background(), looping, opts)
	g.Expect(err).To(MatchError(ContainSubstring("did not finish within 100ms before (a template that loops?); it is not rendered again until the chart or its values change")))
	g.Expect(started.Load()).To(Equal(int32(1)), "the same chart and values are refused without a render")

	opts.Values = &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}
	_, err = r.Render(context.Background(), looping, opts)
	g.Expect(err).To(MatchError(ContainSubstring("did not finish within 100ms (--helm-render-deadline)")))
	g.Expect(started.Load()).To(Equal(int32(2)), "new values are a new render")

	// Both runaway renders still hold their slots: nothing more runs, so
	// runaway charts cannot multiply.
	_, err = r.Render(context.Background(), packageChart(t, sampleChart()), render.HelmOptions{ReleaseName: "sample"})
	g.Expect(err).To(MatchError(ContainSubstring("no Helm render slot came free within 100ms: all 2 are busy")))
	g.Expect(started.Load()).To(Equal(int32(2)))
}

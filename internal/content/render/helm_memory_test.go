package render_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/peakrss"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// Charts that would need gigabytes end in a refusal that names the memory
// limit, while the peak RSS of this process (the operator's, here) hardly
// moves: the memory is the render process's, and it is killed at its
// budget. The figures are printed; the assertion has a wide margin.
func TestRenderMemoryStaysInRenderProcess(t *testing.T) {
	g := NewWithT(t)
	// The renderer logs each render process's own peak RSS.
	ctx := logr.NewContext(context.Background(), testr.NewWithOptions(t, testr.Options{Verbosity: 1}))
	r := render.NewHelmRenderer(render.HelmLimits{Deadline: time.Minute})
	charts := map[string][]byte{
		"3 GB string":         chartWith(t, "templates/huge.yaml", hugeStringTemplate),
		"10 GB kept in loops": chartWith(t, "templates/hoard.yaml", hoardingTemplate),
	}
	// A render before measuring, so that what any render costs the
	// operator once (the renderer, the pipes) is not counted.
	_, err := r.Render(ctx, packageChart(t, sampleChart()), render.HelmOptions{ReleaseName: "sample"}, nil)
	g.Expect(err).NotTo(HaveOccurred())

	before := peakrss.Reset(t)
	for name, archive := range charts {
		_, err := r.Render(ctx, archive, render.HelmOptions{ReleaseName: "sample"}, nil)
		g.Expect(err).To(MatchError(ContainSubstring("it needed more than 256Mi of memory (--helm-max-render-memory-bytes)")), name)
		var refused *render.RefusedError
		g.Expect(errors.As(err, &refused)).To(BeTrue())
		g.Expect(refused.Refusal.Reason).To(Equal(v1beta2.RenderRefusalMemory))
	}
	after := peakrss.Read(t)
	t.Logf("Peak RSS of the test process (the operator) while rendering %d charts that need gigabytes: %s before, %s after, growth %s",
		len(charts), mib(before), mib(after), mib(after-before))
	g.Expect(after-before).To(BeNumerically("<", 200<<20), "peak RSS grew by %s", mib(after-before))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// BenchmarkHelmRender prints what a render process costs: the sample
// chart rendered in this process (HelmChart), and through HelmRenderer,
// in a render process started from this test binary.
func BenchmarkHelmRender(b *testing.B) {
	archive := packageChart(b, sampleChart())
	opts := render.HelmOptions{ReleaseName: "sample"}
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			if _, err := render.HelmChart(archive, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("render-process", func(b *testing.B) {
		r := render.NewHelmRenderer(render.HelmLimits{Deadline: time.Minute, MaxConcurrent: 1})
		for b.Loop() {
			if _, err := r.Render(context.Background(), archive, opts, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

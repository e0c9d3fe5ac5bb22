package content

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/peakrss"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// Huge layers and bodies are refused with a clear error, while the
// operator's memory stays far below their size and the good module next to
// them becomes Ready.
func TestHugeContentIsRefusedWithBoundedMemory(t *testing.T) {
	g := NewWithT(t)
	zeroPin := "#sha256=" + strings.Repeat("0", 64)
	modules := map[string]struct {
		link string
		want string
	}{
		"huge-layer":        {link: env.registry.Link("modules/huge", honestHuge), want: "the registry declares 1073741824 bytes, the limit is 4194304"},
		"lying-layer":       {link: env.registry.Link("modules/huge", lyingHuge), want: "the registry declared 1024 bytes and sends more"},
		"huge-body-length":  {link: env.web.URL + "/huge-length" + zeroPin, want: "the server declares 1073741824 bytes, the limit is 4194304 (--content-max-bytes)"},
		"huge-body-chunked": {link: env.web.URL + "/huge-chunked" + zeroPin, want: "goes on past 4194304 bytes (--content-max-bytes)"},
	}
	names := []string{samplemodules.Sample}
	for name, m := range modules {
		publishModule(t, name, map[string]string{v1beta2.RawManifestResourceName: m.link})
		names = append(names, name)
	}

	memory := sampleMemory()
	kyma := newKyma(t, names...)
	for name, m := range modules {
		msg := eventuallyError(t, kyma, name, m.want)
		g.Expect(msg).To(ContainSubstring("content is larger than the size limit"))
		t.Logf("%s: %s", name, msg)
	}
	// The huge content is fetched again on every retry; the good module
	// converges meanwhile.
	NewWithT(t).Eventually(func(g Gomega) {
		m := manifest(g, kyma, samplemodules.Sample)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateReady), readyMessage(m))
	}, timeout, interval).Should(Succeed())
	heap, sys := memory.Stop()
	t.Logf("Operator memory while refusing 4 x 1 GiB: peak heap growth %s, memory from the OS grew %s", mib(heap), mib(sys))
	g.Expect(heap).To(BeNumerically("<", 96<<20), "peak heap growth %s; the cap is 4 MiB per download, 16 MiB in flight", mib(heap))
}

// chartOf packages a chart of one template.
func chartOf(t *testing.T, name, template string) []byte {
	t.Helper()
	chrt := &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/" + name + ".yaml", Data: []byte(template)}},
	}
	path, err := chartutil.Save(chrt, t.TempDir())
	if err != nil {
		t.Fatalf("packaging chart: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading chart: %v", err)
	}
	return data
}

// chartRuns numbers the runs of the chart tests, for module names of
// their own: with -count the operator still remembers the refusals of an
// earlier run's charts, and their digests include the module's name (the
// release name).
var chartRuns atomic.Int32

// perRun is the name of a module for one run of a test: the run in
// letters, as module names have no digits (run 1 is looping-aab).
func perRun(module string, run int32) string {
	suffix := []byte("aaa")
	for i := len(suffix) - 1; i >= 0 && run > 0; i-- {
		suffix[i] = byte('a' + run%26)
		run /= 26
	}
	return module + "-" + string(suffix)
}

// publishChart pushes a module whose content is the chart and offers it.
func publishChart(t *testing.T, module string, chart []byte) {
	t.Helper()
	artifact, err := ociartifact.Push(context.Background(), env.registry.Host()+"/modules/"+module+":1.0.0",
		ociartifact.Module{HelmChart: chart}.Layers(), ociartifact.Insecure())
	if err != nil {
		t.Fatal(err)
	}
	publishModule(t, module, artifact.Links)
}

// A chart whose template loops puts its Manifest in Error once the render
// deadline passes: its render process is killed. The refusal is kept in
// the Manifest's status, and retries refuse the chart without rendering it.
func TestLoopingChartEndsInError(t *testing.T) {
	looping := perRun("looping", chartRuns.Add(1))
	// 10^12 turns: hours of Helm's engine, were it not killed.
	publishChart(t, looping, chartOf(t, "looping", `{{- range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}`))

	kyma := newKyma(t, looping, samplemodules.Sample)
	start := time.Now()
	msg := eventuallyError(t, kyma, looping, "rendering the Helm chart was stopped: it did not finish within "+renderDeadline.String()+" (--helm-render-deadline)")
	t.Logf("Looping chart in Error after %s: %s", time.Since(start).Round(10*time.Millisecond), msg)
	// Retries refuse at once, without another render.
	eventuallyError(t, kyma, looping, "was stopped before, as it did not finish within "+renderDeadline.String()+" (--helm-render-deadline)")
	expectRenderRefusal(t, kyma, looping, v1beta2.RenderRefusalDeadline, renderDeadline.String())
	NewWithT(t).Eventually(func(g Gomega) {
		m := manifest(g, kyma, samplemodules.Sample)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateReady), readyMessage(m))
	}, timeout, interval).Should(Succeed())
}

// Charts that would need gigabytes of memory put their Manifests in Error
// naming the memory limit, while the operator's peak RSS (this test
// process's) hardly grows: the render processes hold the memory, and are
// killed at their budget. The figures are printed; the budget asserted is
// generous.
func TestChartsThatNeedGigabytesEndInError(t *testing.T) {
	g := NewWithT(t)
	run := chartRuns.Add(1)
	charts := map[string]string{
		// One 3 GB string at once.
		perRun("huge-string", run): `{{ repeat 3000000000 "x" }}`,
		// 1 MB more kept on every turn of a loop, 100 GB in all: the
		// budget is passed after about 130 turns, long before the render
		// deadline even on a loaded machine (at 100 KB a turn, 1,300 turns
		// on two busy cores once took longer than the deadline).
		perRun("hoarding", run): `{{ $d := dict }}{{ range $i := until 100000 }}{{ $_ := set $d (toString $i) (repeat 1000000 "x") }}{{ end }}`,
	}
	modules := []string{samplemodules.Sample}
	for name, template := range charts {
		publishChart(t, name, chartOf(t, "chart", template))
		modules = append(modules, name)
	}

	before := peakrss.Reset(t)
	kyma := newKyma(t, modules...)
	for name := range charts {
		msg := eventuallyError(t, kyma, name, "rendering the Helm chart was stopped: it needed more than 128Mi of memory (--helm-max-render-memory-bytes)")
		t.Logf("%s: %s", name, msg)
		expectRenderRefusal(t, kyma, name, v1beta2.RenderRefusalMemory, "128Mi")
	}
	NewWithT(t).Eventually(func(g Gomega) {
		m := manifest(g, kyma, samplemodules.Sample)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateReady), readyMessage(m))
	}, timeout, interval).Should(Succeed())
	after := peakrss.Read(t)
	t.Logf("Operator (test process) peak RSS while rendering %d charts that need gigabytes: %s before, %s after, growth %s",
		len(charts), mib(uint64(before)), mib(uint64(after)), mib(uint64(max(after-before, 0))))
	g.Expect(after-before).To(BeNumerically("<", 200<<20), "the operator's peak RSS grew by %s", mib(uint64(max(after-before, 0))))
}

// expectRenderRefusal waits for the module's Manifest to keep the refusal
// of its chart in status.
func expectRenderRefusal(t *testing.T, kyma, module string, reason v1beta2.RenderRefusalReason, limit string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		refusal := manifest(g, kyma, module).Status.RenderRefusal
		g.Expect(refusal).NotTo(BeNil())
		g.Expect(refusal.Reason).To(Equal(reason))
		g.Expect(refusal.Limit).To(Equal(limit))
		g.Expect(refusal.Digest).To(MatchRegexp("^sha256:[0-9a-f]{64}$"))
	}, timeout, interval).Should(Succeed())
}

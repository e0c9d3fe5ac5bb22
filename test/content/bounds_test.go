package content

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

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

// loopingChart is a chart whose template keeps Helm's engine busy for
// seconds (4*10^7 iterations), far past the test's render deadline.
func loopingChart(t *testing.T) []byte {
	t.Helper()
	chrt := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "looping", Version: "0.1.0"},
		Templates: []*chart.File{{
			Name: "templates/loop.yaml",
			Data: []byte(`{{- range until 40000 }}{{ range until 1000 }}{{ end }}{{ end }}`),
		}},
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

// A chart whose template loops puts its Manifest in Error once the render
// deadline passes, and is not rendered again on every retry.
func TestLoopingChartEndsInError(t *testing.T) {
	g := NewWithT(t)
	artifact, err := ociartifact.Push(context.Background(), env.registry.Host()+"/modules/looping:1.0.0",
		ociartifact.Module{HelmChart: loopingChart(t)}.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	publishModule(t, "looping", artifact.Links)

	kyma := newKyma(t, "looping", samplemodules.Sample)
	start := time.Now()
	msg := eventuallyError(t, kyma, "looping", "did not finish within 1s")
	t.Logf("Looping chart in Error after %s: %s", time.Since(start).Round(10*time.Millisecond), msg)
	// Retries answer from memory at once, without another render.
	eventuallyError(t, kyma, "looping", "did not finish within 1s before (a template that loops?)")
	NewWithT(t).Eventually(func(g Gomega) {
		m := manifest(g, kyma, samplemodules.Sample)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateReady), readyMessage(m))
	}, timeout, interval).Should(Succeed())
}

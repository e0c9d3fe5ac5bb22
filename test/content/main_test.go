// Package content runs the whole operator in-process against a real control
// plane, a kwok runtime, a real OCI registry and real web servers, and
// checks the bounds on module content: size caps, the in-flight budget, the
// render deadline, the host allow-list, redirects and what errors may carry.
// The operator runs with small caps so that the tests stay fast.
package content

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// kcpNamespace is where the operator under test keeps Kymas and the catalog.
const kcpNamespace = "kcp-system"

// The operator's limits in these tests: small, so that refusing is quick,
// and far below the 1 GiB that the tests offer. The render deadline is
// many times what a chart that eats memory takes to reach the render
// memory budget on a loaded machine, so that such a chart ends at the
// memory budget, as the test expects. The deadline counts from the render
// process's start: on two cores busy with the whole suite, starting the
// process and loading the chart once took most of a 2 s deadline, and a
// hoarding chart ended at the deadline instead.
const (
	maxBytes           = 4 << 20
	inFlightBytes      = 16 << 20
	renderDeadline     = 8 * time.Second
	renderMemoryBudget = 128 << 20
)

var env struct {
	kcp       *testcluster.ControlPlane
	kcpClient client.Client
	runtimes  chan *runtimeHandle
	// registry serves the sample modules and the huge layers.
	registry *contentRegistry
	// web serves http(s) content and is an allowed host; unlisted is a
	// web server on loopback that is not.
	web, unlisted *httptest.Server
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "content", Runtimes: 1, Namespace: kcpNamespace}, setup)
}

// setup starts the registry and the web servers, publishes the sample
// module, puts the runtime in the pool with the sample module's operator,
// and configures the operator with small content limits.
func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.kcpClient = e.KCP, e.Client
	rt := e.Runtimes[0]
	env.registry = startContentRegistry()
	e.Cleanup(env.registry.Close)
	env.web = startWebServer()
	e.Cleanup(env.web.Close)
	env.unlisted = startWebServer()
	e.Cleanup(env.unlisted.Close)
	if err := publishSampleModule(ctx); err != nil {
		return operator.Options{}, fmt.Errorf("publishing the sample module: %w", err)
	}

	h, err := newRuntimeHandle("runtime-0", rt)
	if err != nil {
		return operator.Options{}, err
	}
	go func() { _ = samplemodules.RunSampleOperator(ctx, rt.Config(), 100*time.Millisecond) }()
	env.runtimes = make(chan *runtimeHandle, 1)
	env.runtimes <- h

	opts := e.OperatorOptions()
	opts.CatalogSync = false
	opts.Content.InsecureRegistries = []string{env.registry.Host()}
	opts.Content.AllowedHosts = []string{hostOf(env.web)}
	opts.Content.MaxBytes = maxBytes
	opts.Content.InFlightBytes = inFlightBytes
	opts.Content.RenderDeadline = renderDeadline
	opts.Content.RenderMaxMemoryBytes = renderMemoryBudget
	opts.Content.MaxConcurrentRenders = 2
	return opts, nil
}

// publishSampleModule pushes the sample module (a raw manifest and a
// manager that becomes ready) and offers it on the regular channel: the
// good module that must keep converging next to bad ones.
func publishSampleModule(ctx context.Context) error {
	v, err := samplemodules.Get(samplemodules.Sample, "1.0.0")
	if err != nil {
		return err
	}
	artifact, err := ociartifact.Push(ctx, env.registry.Host()+"/modules/sample:1.0.0", v.Content.Layers(), ociartifact.Insecure())
	if err != nil {
		return err
	}
	if err := env.kcpClient.Create(ctx, v.Template(kcpNamespace, artifact.Links)); err != nil {
		return err
	}
	return env.kcpClient.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, samplemodules.Sample, map[string]string{"regular": "1.0.0"}))
}

func hostOf(server *httptest.Server) string {
	return strings.TrimPrefix(server.URL, "http://")
}

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
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// kcpNamespace is where the operator under test keeps Kymas and the catalog.
const kcpNamespace = "kcp-system"

// The operator's limits in these tests: small, so that refusing is quick,
// and far below the 1 GiB that the tests offer.
const (
	maxBytes       = 4 << 20
	inFlightBytes  = 16 << 20
	renderDeadline = time.Second
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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLoggerFromEnv()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	kcp, runtimes, stop, err := testenv.StartClusters(ctx, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	env.kcp = kcp
	rt := runtimes[0]
	fmt.Printf("content: control plane and a runtime started in %s\n", time.Since(start).Round(10*time.Millisecond))

	env.kcpClient, err = testenv.NewClient(env.kcp.Config())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testenv.CreateNamespace(ctx, env.kcpClient, kcpNamespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	env.registry = startContentRegistry()
	defer env.registry.Close()
	env.web = startWebServer()
	defer env.web.Close()
	env.unlisted = startWebServer()
	defer env.unlisted.Close()
	if err := publishSampleModule(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "publishing the sample module:", err)
		return 1
	}

	h, err := newRuntimeHandle("runtime-0", rt)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = samplemodules.RunSampleOperator(ctx, rt.Config(), 100*time.Millisecond) }()
	env.runtimes = make(chan *runtimeHandle, 1)
	env.runtimes <- h

	opts := testenv.OperatorOptions(env.kcp.Config(), kcpNamespace)
	opts.CatalogSync = false
	opts.Content.InsecureRegistries = []string{env.registry.Host()}
	opts.Content.AllowedHosts = []string{hostOf(env.web)}
	opts.Content.MaxBytes = maxBytes
	opts.Content.InFlightBytes = inFlightBytes
	opts.Content.RenderDeadline = renderDeadline
	opts.Content.MaxConcurrentRenders = 2
	if err := testenv.StartOperator(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	return m.Run()
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

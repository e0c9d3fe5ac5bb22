// Package e2e runs the whole operator in-process against a real control
// plane, real kwok runtimes and a real OCI registry, and checks what a user
// would: Kyma status in the control plane, resources in the runtimes.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// kcpNamespace is where the operator under test keeps Kymas and the catalog.
const kcpNamespace = "kcp-system"

// excludedLabel, set to "true", puts a Kyma outside the operator's
// selection; pausedGroupLabel=yes puts it in the paused group.
const (
	excludedLabel    = "e2e.lifecycle-manager/excluded"
	pausedGroupLabel = "e2e.lifecycle-manager/paused-group"
)

// runtimeCount is how many kwok runtimes the tests share; a test holds one
// at a time (see acquireRuntime).
const runtimeCount = 2

var env struct {
	kcp       *testcluster.ControlPlane
	kcpClient client.Client
	registry  *testregistry.Registry
	runtimes  chan *runtimeHandle
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLoggerFromEnv()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	kcp, runtimes, stop, err := testenv.StartClusters(ctx, runtimeCount)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	env.kcp = kcp
	fmt.Printf("e2e: control plane and %d runtimes started in %s\n", runtimeCount, time.Since(start).Round(10*time.Millisecond))

	env.kcpClient, err = testenv.NewClient(env.kcp.Config())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testenv.CreateNamespace(ctx, env.kcpClient, kcpNamespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	env.registry = testregistry.Start()
	defer env.registry.Close()
	if err := publishSampleModules(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "publishing sample modules:", err)
		return 1
	}

	env.runtimes = make(chan *runtimeHandle, runtimeCount)
	for i, r := range runtimes {
		h, err := newRuntimeHandle(fmt.Sprintf("runtime-%d", i), r)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() { _ = samplemodules.RunSampleOperator(ctx, r.Config(), 100*time.Millisecond) }()
		env.runtimes <- h
	}

	opts := testenv.OperatorOptions(env.kcp.Config(), kcpNamespace)
	// Tests here start their own web servers and registries on loopback, on
	// random ports: 127.0.0.1 alone lists every port. test/content proves
	// that unlisted loopback hosts are refused.
	opts.Content.InsecureRegistries = []string{env.registry.Host(), "127.0.0.1"}
	opts.Content.AllowedHosts = []string{"127.0.0.1"}
	opts.Content.RegistryCredentialsSecret = registryCredentialsSecret
	opts.KymaSelector = excludedLabel + "!=true"
	opts.PauseSelector = pausedGroupLabel + "=yes"
	if err := testenv.StartOperator(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	return m.Run()
}

// publishSampleModules pushes the bundled modules and creates their
// templates; channels are set per test with setChannels.
func publishSampleModules(ctx context.Context) error {
	templates, err := samplemodules.Publish(ctx, env.registry.Host(), kcpNamespace, ociartifact.Insecure())
	if err != nil {
		return err
	}
	for _, t := range templates {
		if err := env.kcpClient.Create(ctx, t); err != nil {
			return err
		}
	}
	for module, channels := range map[string]map[string]string{
		samplemodules.Sample:   {"regular": "1.0.0"},
		samplemodules.Chart:    {"regular": "1.0.0"},
		samplemodules.Evolving: {"regular": "1.0.0", "fast": "2.0.0"},
	} {
		if err := env.kcpClient.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, module, channels)); err != nil {
			return err
		}
	}
	return nil
}

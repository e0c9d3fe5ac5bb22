// Package e2e runs the whole operator in-process against a real control
// plane, real kwok runtimes and a real OCI registry, and checks what a user
// would: Kyma status in the control plane, resources in the runtimes.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/runtime-fleet/lifecycle-manager/internal/access"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
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

// runtimeCount is how many kwok runtimes the tests share. A test holds one
// at a time (newKyma), so that is also how many tests run at once: they
// spend their time waiting for the operator, not on the CPU. Tests that
// read the operator's own counters or catalog-wide writes run alone, first,
// without t.Parallel.
const runtimeCount = 4

var env struct {
	kcp       *testcluster.ControlPlane
	kcpClient client.Client
	registry  *testregistry.Registry
	runtimes  chan *runtimeHandle
	// signedRegistry is a registry the operator requires signatures for,
	// made with signingKey (signatures_test.go); env.registry requires none.
	signedRegistry *testregistry.Registry
	signingKey     signature.Signer
}

func TestMain(m *testing.M) {
	// go test runs GOMAXPROCS parallel tests by default: two on a CI runner
	// of two cores, which would leave runtimes idle. -parallel, when given,
	// still wins.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", strconv.Itoa(runtimeCount))
	}
	testenv.Main(m, testenv.Config{Name: "e2e", Runtimes: runtimeCount, Namespace: kcpNamespace}, setup)
}

// setup publishes the sample modules, puts the runtimes in the pool with
// the sample module's operator in each, and configures the operator.
func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.kcpClient = e.KCP, e.Client
	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)
	if err := publishSampleModules(ctx); err != nil {
		return operator.Options{}, fmt.Errorf("publishing sample modules: %w", err)
	}

	env.runtimes = make(chan *runtimeHandle, runtimeCount)
	for i, r := range e.Runtimes {
		h, err := newRuntimeHandle(fmt.Sprintf("runtime-%d", i), r)
		if err != nil {
			return operator.Options{}, err
		}
		go func() { _ = samplemodules.RunSampleOperator(ctx, r.Config(), 100*time.Millisecond) }()
		env.runtimes <- h
	}

	opts := e.OperatorOptions()
	// Tests here start their own web servers and registries on loopback, on
	// random ports: 127.0.0.1 alone lists every port. test/content proves
	// that unlisted loopback hosts are refused.
	opts.Content.InsecureRegistries = []string{env.registry.Host(), "127.0.0.1"}
	opts.Content.AllowedHosts = []string{"127.0.0.1"}
	opts.Content.RegistryCredentialsSecret = registryCredentialsSecret
	// Templates published for KLM without an embedded descriptor are read
	// from here, as KLM's --oci-registry-host (ocm_registryhost_test.go).
	opts.Content.OCIRegistryHost = "http://" + env.registry.Host()
	opts.Content.ModulesRepositorySubPath = "kyma-modules"
	signed, err := requireSignatures(e)
	if err != nil {
		return operator.Options{}, err
	}
	opts.Content.RequireSignatures = signed
	opts.KymaSelector = excludedLabel + "!=true"
	opts.PauseSelector = pausedGroupLabel + "=yes"
	// Tokens of control-plane modules are renewed every few seconds, so
	// that a test sees a renewal (access_test.go).
	opts.ModuleAccess.TokenTTL = access.MinTokenTTL
	opts.ModuleAccess.TokenRenewBefore = access.MinTokenTTL - 3*time.Second
	// A module's own custom resources whose operator is gone lose the
	// module's finalizers after a minute (contract_orphans_test.go): long
	// enough for a test to bring a manager back first, short enough to
	// wait for.
	opts.OrphanedFinalizers = manifest.OrphanedFinalizers{Policy: manifest.OrphansRemove, After: orphansAfter}
	// Kymas labelled for it are taken over from the Kyma lifecycle-manager
	// (takeover_test.go); the rest never are.
	opts.KLMTakeover = takeover.Labelled
	return opts, nil
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

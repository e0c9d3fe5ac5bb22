// Package isolation proves the trust boundaries between runtimes and the
// operator against real API servers: a runtime's kubeconfig cannot run code
// in the operator or send its credentials elsewhere, and a runtime that hangs
// cannot stop another runtime's modules from converging.
//
// It runs its own operator with a small configuration (4 Manifest workers,
// 2 per runtime, 5 s per runtime request) so that the effect of the worker
// cap is deterministic.
package isolation

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

const kcpNamespace = "kcp-system"

// The operator's configuration in this package: few workers, so that a hung
// runtime would hold all of them without the per-runtime cap.
const (
	manifestWorkers      = 4
	maxWorkersPerRuntime = 2
	requestTimeout       = 5 * time.Second
	reconcileTimeout     = 20 * time.Second
)

// hangLabel marks the module objects that the hanging webhook intercepts.
const hangLabel = "isolation.lifecycle-manager/hang"

// moduleCount is how many one-ConfigMap modules are published: enough that
// the hung runtime's Manifests outnumber the workers twice over.
const moduleCount = 2 * manifestWorkers

var env struct {
	kcp       *testcluster.ControlPlane
	kcpClient client.Client
	registry  *testregistry.Registry
	// runtimes[0] gets the hanging webhook; runtimes[1] stays healthy.
	runtimes [2]*testcluster.Runtime
	clients  [2]client.Client
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "isolation", Runtimes: len(env.runtimes), Namespace: kcpNamespace}, setup)
}

// setup makes clients of the runtimes, publishes the modules and
// configures the operator with few workers.
func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.kcpClient = e.KCP, e.Client
	copy(env.runtimes[:], e.Runtimes)
	for i, r := range env.runtimes {
		var err error
		if env.clients[i], err = testenv.NewClient(r.Config()); err != nil {
			return operator.Options{}, err
		}
	}
	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)
	if err := publishModules(ctx); err != nil {
		return operator.Options{}, fmt.Errorf("publishing modules: %w", err)
	}

	opts := e.OperatorOptions()
	opts.Content.InsecureRegistries = []string{env.registry.Host()}
	opts.CatalogSync = false
	opts.ManifestConcurrency = manifestWorkers
	opts.MaxWorkersPerRuntime = maxWorkersPerRuntime
	opts.RuntimeRequestTimeout = requestTimeout
	opts.ReconcileTimeout = reconcileTimeout
	return opts, nil
}

// moduleNames are the published modules' names (module names are letters
// only).
var moduleNames = []string{"mod-alpha", "mod-bravo", "mod-charlie", "mod-delta", "mod-echo", "mod-foxtrot", "mod-golf", "mod-hotel"}

// moduleName is the name of the i-th published module.
func moduleName(i int) string { return moduleNames[i] }

// publishModules pushes moduleCount modules of one ConfigMap each, labelled
// for the hanging webhook, and puts version 1.0.0 in channel regular.
func publishModules(ctx context.Context) error {
	for i := range moduleCount {
		name := moduleName(i)
		v := samplemodules.Version{Module: name, Version: "1.0.0", Content: ociartifact.Module{RawManifest: []byte(fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  labels:
    %s: "true"
data:
  module: %s
`, name, hangLabel, name))}}
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:1.0.0", env.registry.Host(), name), v.Content.Layers(), ociartifact.Insecure())
		if err != nil {
			return err
		}
		if err := env.kcpClient.Create(ctx, v.Template(kcpNamespace, artifact.Links)); err != nil {
			return err
		}
		if err := env.kcpClient.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, name, map[string]string{"regular": "1.0.0"})); err != nil {
			return err
		}
	}
	return nil
}

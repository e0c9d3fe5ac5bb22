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
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("E2E_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		env.kcp, err = testcluster.StartControlPlane(gctx, testcluster.ControlPlaneOptions{})
		return err
	})
	for i := range env.runtimes {
		g.Go(func() error {
			var err error
			env.runtimes[i], err = testcluster.StartRuntime(gctx, testcluster.RuntimeOptions{})
			return err
		})
	}
	err := g.Wait()
	defer func() {
		for _, r := range env.runtimes {
			if r != nil {
				_ = r.Stop()
			}
		}
		if env.kcp != nil {
			_ = env.kcp.Stop()
		}
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting clusters:", err)
		return 1
	}
	fmt.Printf("isolation: control plane and %d runtimes started in %s\n", len(env.runtimes), time.Since(start).Round(10*time.Millisecond))

	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.registry.Close()

	opts := operator.DefaultOptions()
	opts.Config = env.kcp.Config()
	opts.Namespace = kcpNamespace
	opts.MetricsAddr = "0"
	opts.HealthProbeAddr = "0"
	opts.Intervals = requeue.Intervals{Ready: 2 * time.Second, Processing: 300 * time.Millisecond, Error: time.Second, Warning: time.Second, Jitter: 0.1}
	opts.BaseBackoff = 200 * time.Millisecond
	opts.MaxBackoff = 2 * time.Second
	opts.Content.InsecureRegistries = []string{env.registry.Host()}
	opts.CatalogSync = false
	opts.ManifestConcurrency = manifestWorkers
	opts.MaxWorkersPerRuntime = maxWorkersPerRuntime
	opts.RuntimeRequestTimeout = requestTimeout
	opts.ReconcileTimeout = reconcileTimeout
	mgr, err := operator.New(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the operator:", err)
		return 1
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "operator stopped:", err)
		}
	}()
	return m.Run()
}

func setup(ctx context.Context) error {
	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	if env.kcpClient, err = client.New(env.kcp.Config(), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	for i, r := range env.runtimes {
		if env.clients[i], err = client.New(r.Config(), client.Options{Scheme: scheme}); err != nil {
			return err
		}
	}
	if err := env.kcpClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kcpNamespace}}); err != nil {
		return err
	}
	env.registry = testregistry.Start()
	if err := publishModules(ctx); err != nil {
		return fmt.Errorf("publishing modules: %w", err)
	}
	return nil
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

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
	if os.Getenv("E2E_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	var runtimes [runtimeCount]*testcluster.Runtime
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		env.kcp, err = testcluster.StartControlPlane(gctx, testcluster.ControlPlaneOptions{})
		return err
	})
	for i := range runtimes {
		g.Go(func() error {
			var err error
			runtimes[i], err = testcluster.StartRuntime(gctx, testcluster.RuntimeOptions{})
			return err
		})
	}
	err := g.Wait()
	defer func() {
		for _, r := range runtimes {
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
	fmt.Printf("e2e: control plane and %d runtimes started in %s\n", runtimeCount, time.Since(start).Round(10*time.Millisecond))

	scheme, err := operator.NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.kcpClient, err = client.New(env.kcp.Config(), client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := env.kcpClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kcpNamespace}}); err != nil {
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
		h, err := newRuntimeHandle(fmt.Sprintf("runtime-%d", i), r, scheme)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() { _ = samplemodules.RunSampleOperator(ctx, r.Config(), 100*time.Millisecond) }()
		env.runtimes <- h
	}

	opts := operator.DefaultOptions()
	opts.Config = env.kcp.Config()
	opts.Namespace = kcpNamespace
	opts.MetricsAddr = "0"
	opts.HealthProbeAddr = "0"
	opts.Intervals = requeue.Intervals{Ready: 2 * time.Second, Processing: 300 * time.Millisecond, Error: time.Second, Warning: time.Second, Jitter: 0.1}
	opts.BaseBackoff = 200 * time.Millisecond
	opts.MaxBackoff = 2 * time.Second
	// Tests here start their own web servers and registries on loopback, on
	// random ports: 127.0.0.1 alone lists every port. test/content proves
	// that unlisted loopback hosts are refused.
	opts.Content.InsecureRegistries = []string{env.registry.Host(), "127.0.0.1"}
	opts.Content.AllowedHosts = []string{"127.0.0.1"}
	opts.Content.RegistryCredentialsSecret = registryCredentialsSecret
	opts.KymaSelector = excludedLabel + "!=true"
	opts.PauseSelector = pausedGroupLabel + "=yes"
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

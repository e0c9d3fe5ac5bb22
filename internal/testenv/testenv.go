// Package testenv is the TestMain of the integration test packages
// (test/e2e, test/content, test/isolation, test/watcher, test/faults): a
// real control plane and kwok runtimes, a client of the control plane with
// the operator's scheme, the operator's namespace, and the operator
// in-process (or, for test/faults, as a process of its own) with intervals
// short enough for tests. It exists so that these packages
// start the same environment the same way, and differ only in their own
// fixtures and in the options that are the point of each package
// (allow-lists, caps, worker counts, the watcher).
package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// Config says what a test package's environment holds.
type Config struct {
	// Name starts the line that reports the start-up time, e.g. "e2e".
	Name string
	// Runtimes is how many kwok runtimes start next to the control plane.
	Runtimes int
	// Namespace is where the operator under test keeps Kymas and the
	// catalog; Main creates it.
	Namespace string
	// ExternalOperator says that the package runs the operator itself, as
	// a separate process started in Setup (test/faults kills it); Main then
	// starts none and ignores the options Setup returns.
	ExternalOperator bool
}

// Env is a started environment, handed to a package's Setup.
type Env struct {
	// KCP is the control plane.
	KCP *testcluster.ControlPlane
	// Runtimes are the kwok runtimes, Config.Runtimes of them.
	Runtimes []*testcluster.Runtime
	// Client reaches KCP with the operator's scheme.
	Client client.Client

	namespace string
	cleanups  []func()
}

// Setup prepares a package's fixtures (registries, modules, web servers)
// in a started Env and returns the options of the operator under test. ctx
// ends when the tests have run.
type Setup func(ctx context.Context, e *Env) (operator.Options, error)

// Main is a test package's TestMain: it starts the clusters of cfg, creates
// the namespace, runs setup, starts the operator with the options setup
// returns, runs the tests, and stops everything. It exits with the tests'
// code, or 1 when anything before them fails.
//
// The operator renders Helm charts in child processes of the test binary:
// Main serves them first of all (render.ServeIfRenderProcess), so a
// TestMain must call it before doing anything else worth its time.
func Main(m *testing.M, cfg Config, setup Setup) {
	render.ServeIfRenderProcess()
	os.Exit(run(m, cfg, setup))
}

func run(m *testing.M, cfg Config, setup Setup) int {
	setLoggerFromEnv()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	kcp, runtimes, stop, err := startClusters(ctx, cfg.Runtimes)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	fmt.Printf("%s: control plane and %d runtimes started in %s\n", cfg.Name, cfg.Runtimes, time.Since(start).Round(10*time.Millisecond))

	e := &Env{KCP: kcp, Runtimes: runtimes, namespace: cfg.Namespace}
	defer e.runCleanups()
	if e.Client, err = NewClient(kcp.Config()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cfg.Namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, "creating the operator's namespace:", err)
		return 1
	}
	opts, err := setup(ctx, e)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cfg.ExternalOperator {
		return m.Run()
	}
	// The operator runs as its installed ServiceAccount, with the chart's
	// RBAC; every request it makes is logged, and one refused fails the
	// package even when the operator only retried or logged it.
	pki := opts.Watcher.PKINamespace
	if pki == "" {
		pki = operator.DefaultWatcherOptions().PKINamespace
	}
	identity, granted, err := operatorIdentity(ctx, e.Client, kcp.Config(), cfg.Namespace, pki)
	if err != nil {
		fmt.Fprintln(os.Stderr, "giving the operator its installed identity:", err)
		return 1
	}
	requests := newRequestLog()
	identity.Wrap(requests.wrap)
	opts.Config = identity
	if err := startOperator(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if requests.report(os.Stdout, cfg.Name, granted) && code == 0 {
		code = 1
	}
	return code
}

// Cleanup registers f to run after the tests, before the clusters stop;
// the last registered runs first.
func (e *Env) Cleanup(f func()) {
	e.cleanups = append(e.cleanups, f)
}

func (e *Env) runCleanups() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// setLoggerFromEnv makes controller-runtime log in development mode when
// E2E_LOG is set, and discards its logs otherwise, so that a passing run
// stays quiet and a failing one can be rerun with logs.
func setLoggerFromEnv() {
	if os.Getenv("E2E_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
}

// startClusters starts a control plane and the given number of kwok
// runtimes in parallel. stop stops all of them; on error, whatever started
// is stopped already and stop is nil.
func startClusters(ctx context.Context, runtimes int) (kcp *testcluster.ControlPlane, rts []*testcluster.Runtime, stop func(), err error) {
	rts = make([]*testcluster.Runtime, runtimes)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		kcp, err = testcluster.StartControlPlane(gctx, testcluster.ControlPlaneOptions{})
		return err
	})
	for i := range rts {
		g.Go(func() error {
			var err error
			rts[i], err = testcluster.StartRuntime(gctx, testcluster.RuntimeOptions{})
			return err
		})
	}
	err = g.Wait()
	stop = func() {
		for _, r := range rts {
			if r != nil {
				_ = r.Stop()
			}
		}
		if kcp != nil {
			_ = kcp.Stop()
		}
	}
	if err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("starting clusters: %w", err)
	}
	return kcp, rts, stop, nil
}

// NewClient is a client of the cluster at cfg with the operator's scheme.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// intervals are the operator's requeue intervals in tests: seconds, not
// the production minutes, so that tests see a state change quickly.
var intervals = requeue.Intervals{Ready: 2 * time.Second, Processing: 300 * time.Millisecond, Error: time.Second, Warning: time.Second, Jitter: 0.1}

// OperatorOptions are the operator's defaults with what every test package
// needs on top: the control plane and the namespace, no metrics or probe
// listeners (test packages run in parallel processes), the test intervals
// and a short backoff, and no cap of workers per runtime: the tests register
// many Kymas, each standing for a runtime, against one to four API servers,
// and the cap counts by API server, so it would queue tests behind each
// other. test/isolation sets the cap it tests. A package's Setup sets its
// own options on top.
func (e *Env) OperatorOptions() operator.Options {
	opts := operator.DefaultOptions()
	opts.Config = e.KCP.Config()
	opts.Namespace = e.namespace
	opts.MetricsAddr = "0"
	opts.HealthProbeAddr = "0"
	opts.Intervals = intervals
	opts.BaseBackoff = 200 * time.Millisecond
	opts.MaxBackoff = 2 * time.Second
	opts.MaxWorkersPerRuntime = 0
	return opts
}

// startOperator creates the operator from opts and runs it until ctx ends.
// An error after the start is printed, since no test is there to fail.
func startOperator(ctx context.Context, opts operator.Options) error {
	mgr, err := operator.New(ctx, opts)
	if err != nil {
		return fmt.Errorf("creating the operator: %w", err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "operator stopped:", err)
		}
	}()
	return nil
}

// DescribeKyma is a Kyma's state, conditions and module states on one line,
// for the failure messages of tests that wait for a Kyma.
func DescribeKyma(kyma *v1beta2.Kyma) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s", kyma.Status.State)
	for _, c := range kyma.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, m := range kyma.Status.Modules {
		fmt.Fprintf(&b, " {%s %s %s: %s}", m.Name, m.Version, m.State, m.Message)
	}
	return b.String()
}

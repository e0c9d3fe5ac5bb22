// Package testenv starts what the integration test packages (test/e2e,
// test/content, test/isolation, test/watcher) share in their TestMain: a
// real control plane and kwok runtimes, a client of the control plane with
// the operator's scheme, and the operator in-process with intervals short
// enough for tests. It exists so that these packages start the same
// environment the same way, and differ only in the options that are the
// point of each package (allow-lists, caps, worker counts, the watcher).
package testenv

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// SetLoggerFromEnv makes controller-runtime log in development mode when
// E2E_LOG is set, and discards its logs otherwise, so that a passing run
// stays quiet and a failing one can be rerun with logs.
func SetLoggerFromEnv() {
	if os.Getenv("E2E_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
}

// StartClusters starts a control plane and the given number of kwok
// runtimes in parallel. stop stops all of them; on error, whatever started
// is stopped already and stop is nil.
func StartClusters(ctx context.Context, runtimes int) (kcp *testcluster.ControlPlane, rts []*testcluster.Runtime, stop func(), err error) {
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

// CreateNamespace creates the namespace where the operator under test keeps
// Kymas and the catalog.
func CreateNamespace(ctx context.Context, c client.Client, name string) error {
	return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// intervals are the operator's requeue intervals in tests: seconds, not
// the production minutes, so that tests see a state change quickly.
var intervals = requeue.Intervals{Ready: 2 * time.Second, Processing: 300 * time.Millisecond, Error: time.Second, Warning: time.Second, Jitter: 0.1}

// OperatorOptions are the operator's defaults with what every test package
// needs on top: the control plane at kcpConfig and its namespace, no
// metrics or probe listeners (tests run in parallel processes), the test
// intervals and a short backoff. A package sets its own options on top.
func OperatorOptions(kcpConfig *rest.Config, namespace string) operator.Options {
	opts := operator.DefaultOptions()
	opts.Config = kcpConfig
	opts.Namespace = namespace
	opts.MetricsAddr = "0"
	opts.HealthProbeAddr = "0"
	opts.Intervals = intervals
	opts.BaseBackoff = 200 * time.Millisecond
	opts.MaxBackoff = 2 * time.Second
	return opts
}

// StartOperator creates the operator from opts and runs it until ctx ends.
// An error after the start is printed, since no test is there to fail.
func StartOperator(ctx context.Context, opts operator.Options) error {
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

package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// oneRuntime is what the single-runtime benchmarks (reaction, lone) run
// on: a control plane, one runtime API server without controllers, a
// registry, and clients of both API servers.
type oneRuntime struct {
	kcp      *testcluster.ControlPlane
	runtime  *testcluster.ControlPlane
	registry *testregistry.Registry
	client   client.WithWatch
	rtClient client.Client
}

// start starts both API servers at once, the registry, and the clients.
func (o *oneRuntime) start(ctx context.Context) error {
	var errKCP, errRT error
	var wg sync.WaitGroup
	wg.Go(func() { o.kcp, errKCP = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{}) })
	wg.Go(func() { o.runtime, errRT = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{}) })
	wg.Wait()
	if err := errors.Join(errKCP, errRT); err != nil {
		return fmt.Errorf("starting API servers: %w", err)
	}
	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	if o.client, err = client.NewWithWatch(o.kcp.Config(), client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("creating the control-plane client: %w", err)
	}
	if o.rtClient, err = client.New(o.runtime.Config(), client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("creating the runtime client: %w", err)
	}
	o.registry = testregistry.Start()
	return nil
}

// close stops whatever start started.
func (o *oneRuntime) close() {
	if o.registry != nil {
		o.registry.Close()
	}
	for _, c := range []*testcluster.ControlPlane{o.runtime, o.kcp} {
		if c != nil {
			_ = c.Stop()
		}
	}
}

package dev

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// runtimeTarget is one runtime of the session: a local kwok runtime, or an
// existing cluster attached with --runtime-kubeconfig.
type runtimeTarget struct {
	// Name names the runtime's Kyma and kubeconfig Secret.
	Name string
	// ID is the Kyma's kyma-project.io/runtime-id.
	ID string
	// KubeconfigPath is where a person finds the runtime's kubeconfig: a
	// copy in the state directory, or the attached file itself.
	KubeconfigPath string
	// Attached is true for a cluster lmctl did not start.
	Attached bool

	config *rest.Config
	// kubeconfig is self-contained (no file references, one context), as a
	// kubeconfig Secret must be.
	kubeconfig []byte
	local      *testcluster.Runtime
}

// clusters are the control plane and runtimes of a session.
type clusters struct {
	kcp      *testcluster.ControlPlane
	runtimes []*runtimeTarget

	stopOnce sync.Once
	stopErr  error
}

// startClusters starts the control plane and the local runtimes in parallel
// and attaches the given kubeconfigs. On error nothing it started is left
// running.
func startClusters(ctx context.Context, dir *stateDir, localRuntimes int, attach []string, keep bool) (_ *clusters, err error) {
	c := &clusters{}
	defer func() {
		if err != nil {
			_ = c.stop()
		}
	}()

	// Attached clusters are checked first: a wrong path or an unreachable
	// server is found in seconds, before anything is started.
	for i, path := range attach {
		rt, err := attachRuntime(ctx, fmt.Sprintf("runtime-%d", i), path)
		if err != nil {
			return nil, err
		}
		c.runtimes = append(c.runtimes, rt)
	}

	locals := make([]*testcluster.Runtime, localRuntimes)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		kcp, err := testcluster.StartControlPlane(gctx, testcluster.ControlPlaneOptions{KeepDir: keep})
		mu.Lock()
		c.kcp = kcp
		mu.Unlock()
		return err
	})
	for i := range locals {
		g.Go(func() error {
			r, err := testcluster.StartRuntime(gctx, testcluster.RuntimeOptions{KeepDir: keep})
			mu.Lock()
			locals[i] = r
			mu.Unlock()
			return err
		})
	}
	err = g.Wait()
	// Whatever started is recorded before the error is looked at, so that
	// stop reaches it.
	for i, r := range locals {
		if r == nil {
			continue
		}
		c.runtimes = append(c.runtimes, &runtimeTarget{
			Name:       fmt.Sprintf("runtime-%d", len(attach)+i),
			ID:         string(uuid.NewUUID()),
			config:     r.Config(),
			kubeconfig: r.Kubeconfig(),
			local:      r,
		})
	}
	if err != nil {
		return c, err
	}

	if _, err := dir.write("kcp.kubeconfig", c.kcp.Kubeconfig()); err != nil {
		return c, err
	}
	if err := dir.link("kcp", c.kcp.Dir()); err != nil {
		return c, err
	}
	for _, rt := range c.runtimes {
		if rt.local == nil {
			continue
		}
		if rt.KubeconfigPath, err = dir.write(rt.Name+".kubeconfig", rt.kubeconfig); err != nil {
			return c, err
		}
		if err := dir.link(rt.Name, rt.local.Dir()); err != nil {
			return c, err
		}
	}
	return c, nil
}

// attachTimeout bounds the first contact with an attached cluster.
const attachTimeout = 15 * time.Second

// attachRuntime loads a kubeconfig file's current context, makes it
// self-contained (certificates and keys embedded), and checks that the
// cluster answers.
func attachRuntime(ctx context.Context, name, path string) (*runtimeTarget, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: %w", path, err)
	}
	raw, err := clientcmd.LoadFromFile(abs)
	if err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: %w", path, err)
	}
	if err := clientcmdapi.MinifyConfig(raw); err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: %w", path, err)
	}
	if err := clientcmdapi.FlattenConfig(raw); err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: embedding the files it names: %w", path, err)
	}
	data, err := clientcmd.Write(*raw)
	if err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: %w", path, err)
	}
	// Say it now rather than as the Kyma's KubeconfigRefused later.
	if _, err := kubeconfig.Validate(data); err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: the operator accepts only inline credentials: %w", path, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: %w", path, err)
	}
	cfg.Timeout = attachTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: %w", path, err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("--runtime-kubeconfig %s: the cluster does not answer: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg.Timeout = 0
	return &runtimeTarget{
		Name: name, ID: string(uuid.NewUUID()), KubeconfigPath: abs, Attached: true,
		config: cfg, kubeconfig: data,
	}, nil
}

// stop stops every cluster lmctl started, in parallel; attached clusters are
// left alone. Safe to call more than once.
func (c *clusters) stop() error {
	c.stopOnce.Do(func() {
		var g errgroup.Group
		for _, rt := range c.runtimes {
			if rt.local != nil {
				g.Go(rt.local.Stop)
			}
		}
		if c.kcp != nil {
			g.Go(c.kcp.Stop)
		}
		c.stopErr = g.Wait()
	})
	return c.stopErr
}

// errNoRuntimes is returned when a session would have nothing to manage.
var errNoRuntimes = errors.New("no runtimes: use --runtimes 1 or more, or --runtime-kubeconfig")

package dev

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
)

// runtimeWatchers are the session's runtime-watcher agents (SPEC R9), one
// per local runtime, in-process on loopback as in test/watcher: the
// operator registers each runtime's webhook by URL (LocalAgentURL), the
// runtime's API server calls its agent there, and the agent reports to the
// operator's listener on another loopback port. Attached clusters get
// none: their API servers cannot call this machine's loopback address, and
// their Kymas carry the watcher-paused label so that the operator installs
// nothing there either.
type runtimeWatchers struct {
	// listenerAddress is the operator's listener, on loopback.
	listenerAddress string
	log             logr.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// urls are the agents' webhook base URLs by Kyma name.
	urls map[string]string
}

// newRuntimeWatchers picks a free loopback port for the operator's listener.
// The agents log to logFile at verbosity 1, so that every accepted report
// is in the operator log: a change can be followed from the runtime to the
// reconcile it caused.
func newRuntimeWatchers(ctx context.Context, logFile *os.File) (*runtimeWatchers, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a port for the runtime-watcher listener: %w", err)
	}
	address := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, fmt.Errorf("finding a port for the runtime-watcher listener: %w", err)
	}
	w := &runtimeWatchers{
		listenerAddress: address,
		log:             zap.New(zap.WriteTo(logFile), zap.UseDevMode(true)).WithName("runtime-watcher"),
		urls:            map[string]string{},
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	return w, nil
}

// listenerURL is how the agents reach the operator's listener.
func (w *runtimeWatchers) listenerURL() string {
	return "https://" + w.listenerAddress
}

// localAgentURL is the operator's WatcherOptions.LocalAgentURL: the agent's
// base URL for a local runtime's Kyma, "" for others.
func (w *runtimeWatchers) localAgentURL(kyma *v1beta2.Kyma) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.urls[kyma.Name]
}

// start starts the agent of a local runtime; it must run before the
// runtime's Kyma is created, so that the operator registers the agent's URL
// from the start. The agent waits for the certificates the operator writes
// into the runtime, and stops with stop.
func (w *runtimeWatchers) start(rt *runtimeTarget) error {
	if rt.Attached {
		return nil
	}
	opts := agent.DefaultOptions()
	// The runtime's admin config, not the agent's ServiceAccount (whose Role
	// test/watcher covers): the agent loads its certificates as soon as they
	// are written, instead of backing off until the Role exists.
	opts.Config = rt.config
	opts.Namespace = v1beta2.DefaultRuntimeNamespace
	opts.ListenAddress = "127.0.0.1:0"
	opts.MetricsAddress = "0"
	opts.ListenerURL = w.listenerURL()
	opts.KymaName = rt.Name
	opts.Logger = w.log.WithValues("runtime", rt.Name)
	a, err := agent.New(opts)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.urls[rt.Name] = a.WebhookURL()
	w.mu.Unlock()
	w.wg.Go(func() {
		// A failed agent leaves its runtime to the operator's fallback
		// reconcile; the session goes on.
		if err := a.Start(w.ctx); err != nil {
			opts.Logger.Error(err, "The runtime-watcher stopped")
		}
	})
	return nil
}

// stop stops every agent and waits for them.
func (w *runtimeWatchers) stop() {
	w.cancel()
	w.wg.Wait()
}

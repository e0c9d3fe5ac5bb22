package dev

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// devIntervals suit a handful of runtimes on a laptop: installs are followed
// closely. A Ready Kyma or module is looked at again at the operator's
// default interval, as in production: a local runtime's watcher reports
// its owner's changes at once. Attached clusters have no watcher here, so
// a session with one looks every 15 s, for their owners' changes to show
// within seconds all the same.
func devIntervals(attached bool) requeue.Intervals {
	ready := requeue.DefaultIntervals().Ready
	if attached {
		ready = 15 * time.Second
	}
	return requeue.Intervals{
		Ready:      ready,
		Processing: 500 * time.Millisecond,
		Error:      2 * time.Second,
		Warning:    2 * time.Second,
		Jitter:     0.1,
	}
}

// runningOperator is the lifecycle manager running in this process.
type runningOperator struct {
	cancel context.CancelFunc
	done   chan error
	log    *os.File
}

// logToFile sends controller-runtime's and client-go's logs to path, so
// that the terminal shows progress, not controller chatter. It must run
// before the first client is made: controller-runtime takes one logger per
// process, and prints a warning with a stack trace to the terminal when
// none is set 30 s after start (a first build of the binaries takes longer).
func logToFile(path string) (*os.File, error) {
	logFile, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the operator log: %w", err)
	}
	logger := zap.New(zap.WriteTo(logFile), zap.ConsoleEncoder())
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	return logFile, nil
}

// startOperator runs the lifecycle manager in-process through operator.New,
// the same wiring as the binary; it logs through logToFile's logger. Its
// runtime watcher runs in local mode: the listener on the loopback port
// watchers picked, each local runtime's agent registered by URL.
func startOperator(ctx context.Context, kcp *rest.Config, namespace, registryHost, backupIdentity string, intervals requeue.Intervals, watchers *runtimeWatchers, logFile *os.File) (*runningOperator, error) {
	var err error
	opts := operator.DefaultOptions()
	opts.Config = kcp
	opts.Namespace = namespace
	// No ports: two sessions, or a session and a test, must not collide (the
	// watcher's listener takes a free one).
	opts.MetricsAddr = "0"
	opts.HealthProbeAddr = "0"
	opts.Intervals = intervals
	opts.BaseBackoff = 200 * time.Millisecond
	opts.MaxBackoff = 5 * time.Second
	opts.Content.InsecureRegistries = []string{registryHost}
	if opts.Backup.Schedules, err = devBackups(registryHost, backupIdentity); err != nil {
		return nil, err
	}
	opts.Watcher = operator.WatcherOptions{
		ListenerAddress: watchers.listenerAddress,
		ListenerURL:     watchers.listenerURL(),
		LocalAgentURL:   watchers.localAgentURL,
	}

	opCtx, cancel := context.WithCancel(ctx)
	mgr, err := operator.New(opCtx, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("creating the operator: %w", err)
	}
	op := &runningOperator{cancel: cancel, done: make(chan error, 1), log: logFile}
	go func() { op.done <- mgr.Start(opCtx) }()
	return op, nil
}

// operatorStopTimeout bounds the operator's graceful stop; its clusters are
// stopped right after either way.
const operatorStopTimeout = 15 * time.Second

// stop stops the operator and waits for it. The log file stays open until
// the process ends: client-go may still log while the clusters go down, and
// a write to a closed file would end up on the terminal.
func (o *runningOperator) stop() error {
	o.cancel()
	select {
	case err := <-o.done:
		if err != nil {
			return fmt.Errorf("operator: %w", err)
		}
		return nil
	case <-time.After(operatorStopTimeout):
		return fmt.Errorf("the operator did not stop within %s", operatorStopTimeout)
	}
}

// failed returns the operator's error if it stopped on its own.
func (o *runningOperator) failed() error {
	select {
	case err := <-o.done:
		o.done <- err // keep it for stop
		if err == nil {
			return fmt.Errorf("the operator stopped unexpectedly; see %s", o.log.Name())
		}
		return fmt.Errorf("the operator stopped: %w; see %s", err, o.log.Name())
	default:
		return nil
	}
}

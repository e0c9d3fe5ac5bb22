package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// operatorProcess is the operator under test, run as the binary a cluster
// runs, in a process of its own, so that a test can kill it with SIGKILL
// the way a node failure or an OOM kill ends it.
type operatorProcess struct {
	bin     string
	args    []string
	logPath string

	mu  sync.Mutex
	cmd *testcluster.Command
}

// buildOperator builds cmd/lifecycle-manager into dir; the go build cache
// makes this quick after the test binary itself was built.
func buildOperator(dir string) (string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lifecycle-manager")
	return bin, testcluster.GoBuild(root, "./cmd/lifecycle-manager", bin)
}

// operatorArgs are the flags of the operator under test: the control plane
// and namespace, no listeners (metrics, probes, the runtime watcher), second-
// scale requeue intervals, and a backoff cap of a few seconds, short
// against the outages here, so that recovery is quick and an outage spans
// many capped retries.
func operatorArgs(kubeconfig, registryHost string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + kcpNamespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--listener-address=0",
		"--requeue-ready=2s",
		"--requeue-processing=300ms",
		"--requeue-error=1s",
		"--requeue-warning=1s",
		"--requeue-jitter=0.1",
		"--backoff-base=200ms",
		"--backoff-max=" + backoffCap.String(),
		"--insecure-registries=" + registryHost,
		"--zap-stacktrace-level=panic",
	}
}

// start starts the operator; its output is appended to logPath.
func (o *operatorProcess) start() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd != nil && o.cmd.Running() {
		return fmt.Errorf("the operator is already running (pid %d)", o.cmd.Pid())
	}
	cmd, err := testcluster.StartCommand(o.bin, o.args, o.logPath)
	if err != nil {
		return fmt.Errorf("starting the operator: %w", err)
	}
	o.cmd = cmd
	return nil
}

// kill sends SIGKILL and returns once the process is gone.
func (o *operatorProcess) kill() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return nil
	}
	return o.cmd.Kill()
}

// exitError says why the operator exited on its own, nil while it runs.
func (o *operatorProcess) exitError() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return fmt.Errorf("the operator was never started")
	}
	return o.cmd.ExitError()
}

// logSize marks a point in the operator's log, for logSince.
func (o *operatorProcess) logSize() int64 {
	info, err := os.Stat(o.logPath)
	if err != nil {
		return 0
	}
	return info.Size()
}

// logSince returns what the operator logged after the mark.
func (o *operatorProcess) logSince(mark int64) string {
	data, err := os.ReadFile(o.logPath)
	if err != nil || int64(len(data)) < mark {
		return ""
	}
	return string(data[mark:])
}

// operatorLogLines is how much of the operator's log a failed test prints.
const operatorLogLines = 60

// reportOnFailure makes t print the end of the operator's log if it fails,
// and fail if the operator exited by itself.
func (o *operatorProcess) reportOnFailure(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if err := o.exitError(); err != nil {
			t.Errorf("the operator exited by itself: %v", err)
		}
		if t.Failed() {
			o.mu.Lock()
			tail := o.cmd.LogTail(operatorLogLines)
			o.mu.Unlock()
			t.Logf("last %d lines of the operator's log %s:\n%s", operatorLogLines, o.logPath, strings.TrimSpace(tail))
		}
	})
}

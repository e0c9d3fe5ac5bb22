package fleetbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// measureStarts builds the operator binary and starts it opts.Starts times,
// each time in a control-plane namespace of its own that holds a Kyma it
// has never seen (with one module, its runtime in a sync namespace of its
// own), and measures the time from starting the process to the Kyma's
// first status. Each process runs with the binary's defaults (the runtime
// watcher on) and is killed once the status is there; the watcher CA is
// created by the first start and found by the others, as on a restart.
func (r *reaction) measureStarts(ctx context.Context) ([]float64, error) {
	dir, err := os.MkdirTemp("", "fleetbench-starts-")
	if err != nil {
		return nil, err
	}
	bin, err := buildOperatorBinary(ctx, dir)
	if err != nil {
		return nil, err
	}
	var samples []float64
	for i := range r.opts.Starts {
		started, seen, err := r.measureStart(ctx, bin, filepath.Join(dir, "operator.log"), i)
		if err != nil {
			return samples, fmt.Errorf("operator start %d (log: %s): %w", i+1, filepath.Join(dir, "operator.log"), err)
		}
		d := seen.Sub(started)
		samples = append(samples, d.Seconds())
		// The clock times let the operator's log (rfc3339nano) be read
		// against the start.
		fmt.Fprintf(r.opts.Progress, "start %d/%d: first Kyma status %.3fs after the operator process started (%s → %s)\n",
			i+1, r.opts.Starts, d.Seconds(), started.UTC().Format(clockFormat), seen.UTC().Format(clockFormat))
	}
	fmt.Fprintf(r.opts.Progress, "operator log of the starts: %s\n", filepath.Join(dir, "operator.log"))
	return samples, nil
}

// clockFormat shows a wall-clock time to the millisecond.
const clockFormat = "15:04:05.000"

// measureStart runs start i of the binary and returns when the process was
// started and when the Kyma's first status was seen.
func (r *reaction) measureStart(ctx context.Context, bin, logPath string, i int) (started, seen time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ns := startNamespace(i)
	name := "first-status"
	module := reactionModuleNames(r.opts.Repetitions + r.opts.Starts)[r.opts.Repetitions+i]
	if err := publishReactionModules(ctx, r.client, r.registry.Host(), []string{module}, []string{ns}); err != nil {
		return started, seen, err
	}
	spec := v1beta2.KymaSpec{Channel: benchChannel, SyncNamespace: ns, Modules: []v1beta2.Module{{Name: module, Managed: true}}}
	if err := createRuntimeKyma(ctx, r.client, ns, name, r.runtime.Kubeconfig(), spec); err != nil {
		return started, seen, err
	}
	listenerAddr, err := freeLoopbackAddr()
	if err != nil {
		return started, seen, err
	}
	args := []string{
		"--kubeconfig=" + r.kcp.KubeconfigPath(),
		"--namespace=" + ns,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--listener-address=" + listenerAddr,
		"--listener-names=localhost,127.0.0.1",
		"--watcher-pki-namespace=first-status-pki",
		"--insecure-registries=" + r.registry.Host(),
		"--zap-time-encoding=rfc3339nano",
	}
	states := (&kymaStates{changed: make(chan struct{})}).follow(ctx, r.client, ns, name)
	started = time.Now()
	cmd, err := testcluster.StartCommand(bin, args, logPath)
	if err != nil {
		return started, seen, fmt.Errorf("starting the operator: %w", err)
	}
	defer func() { _ = cmd.Kill() }()
	if seen, err = states.firstStatus(ctx); err != nil {
		if exit := cmd.ExitError(); exit != nil {
			return started, seen, exit
		}
		return started, seen, fmt.Errorf("no status on the Kyma: %w", err)
	}
	return started, seen, nil
}

// buildOperatorBinary builds cmd/lifecycle-manager into dir, from the
// module the benchmark runs in.
func buildOperatorBinary(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root (run fleet-bench from the repository): %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(dir, "lifecycle-manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lifecycle-manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the operator: %w: %s", err, out)
	}
	return bin, nil
}

package render

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

const (
	// renderProcessStartLimit bounds how long a render process may take to
	// start and read the chart. That is the machine's doing, not the
	// chart's, so it does not count against the render deadline and is no
	// refusal: on a loaded node a start can take a while, and a good chart
	// must not be refused for it.
	renderProcessStartLimit = time.Minute
	// stderrKept is how much of a render process's stderr is kept: the
	// start of a Go runtime error says what happened.
	stderrKept = 4 << 10
	// messageSlack is what the messages around the objects may add to the
	// output limit on the pipe: framing and an error text.
	messageSlack = 1 << 20
)

// renderInProcess renders in a child process of this binary and kills it
// at the deadline, when ctx ends, or when it sends more than the output
// limit. Its memory budget it enforces itself (limitMemory); when it runs
// out, the Go runtime ends it with "out of memory" on stderr.
func (r *HelmRenderer) renderInProcess(ctx context.Context, archive []byte, opts HelmOptions) ([]*unstructured.Unstructured, error) {
	header, err := json.Marshal(renderRequest{Options: opts})
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	cmd := exec.Command(renderExecutable())
	cmd.Env = append(os.Environ(), renderProcessEnv+"="+strconv.FormatInt(r.limits.MaxMemoryBytes, 10))
	cmd.Stdin = io.MultiReader(bytes.NewReader(append(header, '\n')), bytes.NewReader(archive))
	stderr := &headBuffer{max: stderrKept}
	cmd.Stderr = stderr
	// A killed process closes its pipes at once; this only guards Wait
	// against anything that would keep them open.
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting a Helm render process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a Helm render process: %w", err)
	}
	if r.started != nil {
		r.started(cmd.Process.Pid)
	}

	started := make(chan struct{})
	read := make(chan renderRead, 1)
	go func() { read <- readRender(stdout, r.limits.MaxOutputBytes, started) }()

	// stop kills the process once, for the first reason that comes;
	// reading then ends as its stdout closes.
	var stopped error
	stop := func(why error) {
		if stopped == nil {
			stopped = why
			_ = cmd.Process.Kill()
		}
	}
	start := time.NewTimer(renderProcessStartLimit)
	defer start.Stop()
	deadline := time.NewTimer(r.limits.Deadline)
	deadline.Stop()
	var res renderRead
	rendering := (<-chan struct{})(started)
wait:
	for {
		select {
		case <-rendering:
			rendering = nil
			start.Stop()
			deadline.Reset(r.limits.Deadline)
		case <-start.C:
			stop(fmt.Errorf("the Helm render process did not start within %s; the node may be overloaded", renderProcessStartLimit))
		case <-deadline.C:
			stop(&RefusedError{Refusal: v1beta2.RenderRefusal{Reason: v1beta2.RenderRefusalDeadline},
				detail: "it " + overLimit(v1beta2.RenderRefusalDeadline, r.limit(v1beta2.RenderRefusalDeadline))})
		case <-ctx.Done():
			stop(fmt.Errorf("rendering the Helm chart: %w", ctx.Err()))
		case res = <-read:
			break wait
		}
	}
	deadline.Stop()
	if res.tooLarge {
		stop(&RefusedError{Refusal: v1beta2.RenderRefusal{Reason: v1beta2.RenderRefusalOutput},
			detail: fmt.Sprintf("the objects it renders are more than %d bytes (--helm-max-output-bytes)", r.limits.MaxOutputBytes)})
	}
	waitErr := cmd.Wait()
	logr.FromContextOrDiscard(ctx).V(1).Info("Helm render process ended", "pid", cmd.Process.Pid,
		"peakRSS", peakRSS(cmd.ProcessState), "rendered", res.done)

	switch {
	case stopped != nil:
		return nil, stopped
	case res.done:
		return res.objs, nil
	case res.failed != nil && res.failed.OutputTooLarge:
		return nil, &RefusedError{Refusal: v1beta2.RenderRefusal{Reason: v1beta2.RenderRefusalOutput}, detail: res.failed.Error}
	case res.failed != nil:
		return nil, errors.New(res.failed.Error)
	case outOfMemory(stderr.String()):
		return nil, &RefusedError{Refusal: v1beta2.RenderRefusal{Reason: v1beta2.RenderRefusalMemory},
			detail: "it " + overLimit(v1beta2.RenderRefusalMemory, r.limit(v1beta2.RenderRefusalMemory))}
	default:
		return nil, fmt.Errorf("the Helm render process ended without an answer (%w): %s", errors.Join(waitErr, res.err), firstLine(stderr.String()))
	}
}

// renderRead is what was read from a render process.
type renderRead struct {
	objs []*unstructured.Unstructured
	// done: every object came. failed: the render failed with the
	// message's error.
	done   bool
	failed *renderMessage
	// tooLarge: the objects went over the output limit.
	tooLarge bool
	// err is why reading ended early: the process ended (EOF) or sent
	// something else than messages.
	err error
}

// readRender reads a render process's messages until the last one, the
// end of its output, or more than maxOutput bytes of objects. rendering is
// closed when the process says it has started to render.
func readRender(stdout io.Reader, maxOutput int64, rendering chan<- struct{}) renderRead {
	limited := &io.LimitedReader{R: stdout, N: maxOutput + messageSlack}
	reader := bufio.NewReader(limited)
	var res renderRead
	var output int64
	started := false
	for {
		line, err := reader.ReadBytes('\n')
		if err != nil {
			res.tooLarge = limited.N <= 0
			res.err = err
			return res
		}
		var m renderMessage
		if err := json.Unmarshal(line, &m); err != nil {
			res.err = fmt.Errorf("reading the render process: %w", err)
			return res
		}
		switch {
		case m.Rendering && !started:
			started = true
			close(rendering)
		case m.Object != nil:
			if output += int64(len(m.Object)); output > maxOutput {
				res.tooLarge = true
				return res
			}
			var obj map[string]any
			// utiljson keeps integers as int64, as Raw does.
			if err := utiljson.Unmarshal(m.Object, &obj); err != nil {
				res.err = fmt.Errorf("reading the render process: %w", err)
				return res
			}
			res.objs = append(res.objs, &unstructured.Unstructured{Object: obj})
		case m.Done:
			res.done = true
			return res
		case m.Error != "":
			res.failed = &m
			return res
		}
	}
}

// outOfMemory tells from a render process's stderr that the Go runtime
// ended it for want of memory: an allocation past the budget failed. (In a
// binary built with -race, the race detector's runtime says so itself.)
func outOfMemory(stderr string) bool {
	goRuntime := strings.Contains(stderr, "fatal error: ") &&
		(strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory"))
	raceRuntime := strings.Contains(stderr, "ThreadSanitizer failed to allocate") && strings.Contains(stderr, "errno: 12")
	return goRuntime || raceRuntime
}

// peakRSS is the most memory a process that ended held at once, as
// Linux's wait4 reports it, for the log: what a chart needed, to
// set --helm-max-render-memory-bytes by.
func peakRSS(state *os.ProcessState) string {
	if usage, ok := state.SysUsage().(*syscall.Rusage); ok {
		return fmt.Sprintf("%.1f MiB", float64(usage.Maxrss)/(1<<10))
	}
	return "unknown"
}

// renderExecutable is this binary: /proc/self/exe on Linux, which names
// the running program even when its file was replaced since it started.
func renderExecutable() string {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self
	}
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return os.Args[0]
}

// headBuffer keeps the first max bytes written to it and drops the rest.
type headBuffer struct {
	bytes.Buffer
	max int
}

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

package render

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderProcessEnv marks a process started to render one chart; its value
// is the memory budget in bytes. Set only by renderInProcess.
const renderProcessEnv = "LIFECYCLE_MANAGER_HELM_RENDER_PROCESS"

// servesRenders is set once this binary has called ServeIfRenderProcess,
// so that a binary that forgot to cannot start render processes that would
// run its main (or its tests) instead of rendering.
var servesRenders atomic.Bool

// ServeIfRenderProcess renders a chart and exits when this process was
// started as a Helm render process; otherwise it returns at once. Every
// binary that renders charts through HelmRenderer must call it first thing
// in main (tests: in TestMain), before anything that must not run in a
// render process. HelmRenderer starts render processes from its own binary
// (/proc/self/exe), and refuses to when this was not called.
func ServeIfRenderProcess() {
	servesRenders.Store(true)
	budget, ok := os.LookupEnv(renderProcessEnv)
	if !ok {
		return
	}
	os.Exit(serveRender(budget, os.Stdin, os.Stdout))
}

// RendersInProcesses tells whether this binary called ServeIfRenderProcess,
// so that what builds a HelmRenderer can refuse to start without it.
func RendersInProcesses() bool { return servesRenders.Load() }

// ErrNoRenderProcess is the cause of a render refused because the binary
// does not call ServeIfRenderProcess.
var ErrNoRenderProcess = errors.New("this binary does not call render.ServeIfRenderProcess() first thing in main (or TestMain), so it cannot render Helm charts in child processes")

// renderRequest is the first line a render process reads; the chart
// archive follows it until the end of stdin.
type renderRequest struct {
	Options HelmOptions `json:"options"`
}

// renderMessage is one line a render process writes to stdout: Rendering
// first, once the request is read (the deadline counts from it), then each
// object, then Done or Error.
type renderMessage struct {
	Rendering      bool            `json:"rendering,omitempty"`
	Object         json.RawMessage `json:"object,omitempty"`
	Error          string          `json:"error,omitempty"`
	OutputTooLarge bool            `json:"outputTooLarge,omitempty"`
	Done           bool            `json:"done,omitempty"`
}

// serveRender is the render process: it caps its own memory, reads the
// request and writes what HelmChart gives. Its exit code is for people;
// the parent reads the messages.
func serveRender(budget string, in io.Reader, out io.Writer) int {
	limit, err := strconv.ParseInt(budget, 10, 64)
	if err != nil || limit <= 0 {
		fmt.Fprintf(os.Stderr, "render process: bad memory budget %q\n", budget)
		return 2
	}
	if err := limitMemory(limit); err != nil {
		fmt.Fprintln(os.Stderr, "render process:", err)
		return 2
	}
	reader := bufio.NewReader(in)
	header, err := reader.ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "render process: reading the request:", err)
		return 2
	}
	var req renderRequest
	if err := json.Unmarshal(header, &req); err != nil {
		fmt.Fprintln(os.Stderr, "render process: reading the request:", err)
		return 2
	}
	archive, err := io.ReadAll(reader)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render process: reading the chart:", err)
		return 2
	}
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	send := func(m renderMessage) bool {
		if err := enc.Encode(m); err != nil {
			return false
		}
		// Rendering and the last message must reach the parent at once;
		// objects may wait in the buffer.
		return m.Object != nil || w.Flush() == nil
	}
	if !send(renderMessage{Rendering: true}) {
		return 2
	}
	objs, err := renderRecovered(archive, req.Options)
	if err != nil {
		send(renderMessage{Error: err.Error(), OutputTooLarge: errors.Is(err, ErrOutputTooLarge)})
		return 1
	}
	for _, obj := range objs {
		data, err := json.Marshal(obj.Object)
		if err != nil {
			send(renderMessage{Error: fmt.Sprintf("encoding %s %s: %v", obj.GetKind(), obj.GetName(), err)})
			return 1
		}
		if !send(renderMessage{Object: data}) {
			return 2
		}
	}
	if !send(renderMessage{Done: true}) {
		return 2
	}
	return 0
}

// renderRecovered is HelmChart with a panic turned into an error: a chart
// that makes Helm panic gets a message, not a stack trace on stderr.
func renderRecovered(archive []byte, opts HelmOptions) (objs []*unstructured.Unstructured, err error) {
	defer func() {
		if p := recover(); p != nil {
			objs, err = nil, fmt.Errorf("rendering the Helm chart panicked: %v", p)
		}
	}()
	return HelmChart(archive, opts)
}

// limitMemory caps what this process may map from now on at budget
// bytes, before it reads the chart: the budget is the render's, on top of
// what the process mapped as it started (the binary's data, Go's runtime
// and what package initialisation allocated: ~120 MiB for the operator's
// binary, far less for a test's), which is the binary's and not the
// chart's doing.
//
// The hard cap is RLIMIT_DATA, which since Linux 4.7 counts the private
// writable mappings that Go's heap, stacks and runtime metadata live in
// (VmData): an allocation past it fails in the kernel, and Go ends the
// process with "out of memory", at once, however fast the template
// allocates. Watching the child's RSS from the parent instead would race a
// template that allocates gigabytes between two looks; RLIMIT_AS would
// count the address space Go reserves but never uses.
//
// The soft limit (debug.SetMemoryLimit) makes the garbage collector work
// harder as the heap nears the cap, so that a template that makes garbage
// is not stopped for it; only memory it keeps counts. It is below the hard
// cap by a quarter of the budget, for what Go maps besides the heap.
//
// GOMAXPROCS 1: a render is one goroutine, so a render process uses about
// one core, and --helm-max-concurrent-renders bounds the cores rendering
// takes. oom_score_adj 1000: should the container run out of memory anyway,
// the kernel stops a render, not the operator.
func limitMemory(budget int64) error {
	runtime.GOMAXPROCS(1)
	mapped, err := mappedData()
	if err != nil {
		return err
	}
	hard := uint64(mapped + budget)
	if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: hard, Max: hard}); err != nil {
		return fmt.Errorf("capping memory at %d bytes: %w", hard, err)
	}
	debug.SetMemoryLimit(goMemory() + budget/4*3)
	// Best effort: without /proc (not Linux) there is no OOM killer to
	// steer.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	return nil
}

// mappedData is VmData from /proc/self/status: what RLIMIT_DATA counts.
func mappedData() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading what this process has mapped: %w", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmData:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading VmData: %w", err)
			}
			return kib << 10, nil
		}
	}
	return 0, errors.New("no VmData in /proc/self/status")
}

// goMemory is the memory that debug.SetMemoryLimit counts, as of now.
func goMemory() int64 {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	return int64(samples[0].Value.Uint64() - samples[1].Value.Uint64())
}

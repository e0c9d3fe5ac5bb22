package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startRequest asks the launcher goroutine to start one command.
type startRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	launchOnce     sync.Once
	launchRequests chan startRequest
)

// startOnLauncherThread starts cmd from one goroutine that is locked to its OS thread for the
// life of the process.
//
// Why: every child gets Pdeathsig=SIGKILL so that it dies with the test binary — also after
// a panic, a `go test -timeout` or a SIGKILL of the parent, when no Go cleanup runs. But Linux
// delivers the parent-death signal when the *thread* that forked the child exits, not the
// process, and the Go runtime retires idle threads at will. A child forked from an ordinary
// goroutine could therefore be killed in the middle of a test. The launcher goroutine calls
// runtime.LockOSThread and never returns, so its thread lives exactly as long as the process.
func startOnLauncherThread(cmd *exec.Cmd) error {
	launchOnce.Do(func() {
		launchRequests = make(chan startRequest)
		go func() {
			runtime.LockOSThread()
			// Never unlocked and never returns: see above.
			for req := range launchRequests {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	launchRequests <- startRequest{cmd: cmd, done: done}
	return <-done
}

// process is one running control-plane binary whose output goes to a log file in the
// cluster's directory.
type process struct {
	name    string
	logPath string
	// logStart is the log's size when this process started; the log is shared with earlier
	// runs of the same binary (a restarted API server), whose lines must not be mistaken
	// for this run's.
	logStart int64

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited and been reaped
	err    error         // cmd.Wait's result; read only after exited is closed
}

// startProcess starts binary with args; its stdout and stderr are appended to logPath.
func startProcess(name, path string, args []string, logPath string) (*process, error) {
	return startProcessWithEnv(name, path, args, nil, logPath)
}

// startProcessWithEnv is startProcess with env added to this process's environment.
func startProcessWithEnv(name, path string, args, env []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Dies with the test binary, however the test binary ends (see startOnLauncherThread).
		Pdeathsig: syscall.SIGKILL,
		// Own process group, so that Stop also reaches anything the binary forks.
		Setpgid: true,
	}
	err = startOnLauncherThread(cmd)
	// The child holds its own copy of the descriptor.
	_ = logFile.Close()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, logStart: logStart, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop kills the whole process group and waits until the process is reaped. SIGKILL rather
// than SIGTERM: the data of a stopped cluster is either thrown away or, for a stopped API
// server, lives in etcd; a graceful API server shutdown would only cost seconds per test.
func (p *process) stop() error {
	if !p.running() {
		return nil
	}
	if err := syscall.Kill(-p.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", p.name, p.pid(), err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit 30s after SIGKILL", p.name, p.pid())
	}
}

// exitError describes an early exit, with the end of the log, which is where the reason is.
func (p *process) exitError() error {
	cause := p.err
	if cause == nil {
		cause = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited early (%w); last lines of %s:\n%s", p.name, cause, p.logPath, p.logTail())
}

// logTailLines is how much of a failed process's log an error carries: enough for the
// fatal message and its immediate cause, short enough to read in a test failure.
const logTailLines = 20

func (p *process) logTail() string { return p.lastLines(logTailLines) }

// lastLines returns the last n lines this run of the process wrote.
func (p *process) lastLines(n int) string {
	data, err := p.log()
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// bindFailed reports whether the process exited because its port was taken, which happens
// when another process grabs a port between freePorts closing it and the binary binding it.
func (p *process) bindFailed() bool {
	if p.running() {
		return false
	}
	data, err := p.log()
	return err == nil && bytes.Contains(data, []byte("address already in use"))
}

// log returns what this run of the process wrote.
func (p *process) log() ([]byte, error) {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p.logPath, err)
	}
	if int64(len(data)) >= p.logStart {
		data = data[p.logStart:]
	}
	return data, nil
}

// readyPollInterval is short because readiness usually comes within a second or two and
// every poll interval is added to every start.
const readyPollInterval = 50 * time.Millisecond

// waitReady polls ready until it returns nil, the process exits, ctx ends or timeout
// passes; the error then carries the end of the process's log.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(readyPollInterval)
	defer ticker.Stop()
	var last error
	for {
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		last = ready(attemptCtx)
		cancelAttempt()
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (timeout %s): %w (last check: %w); last lines of %s:\n%s",
				p.name, timeout, ctx.Err(), last, p.logPath, p.logTail())
		case <-ticker.C:
		}
	}
}

var (
	portsMu sync.Mutex
	// portsHandedOut keeps parallel clusters in this process from being handed the same port
	// between freePorts closing its listener and the binary binding it.
	portsHandedOut = map[int]bool{}
)

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment ago. Starts retry
// with new ports when a binary still finds one taken (see process.bindFailed).
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		port := l.Addr().(*net.TCPAddr).Port
		if portsHandedOut[port] {
			continue
		}
		portsHandedOut[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago, for a test that starts a binary listening on them.
func FreePorts(n int) ([]int, error) { return freePorts(n) }

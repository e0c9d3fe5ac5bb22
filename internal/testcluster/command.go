package testcluster

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
)

// GoBuild builds the Go package pkg (such as ./cmd/lifecycle-manager) of
// the module at srcRoot into out, as an image or a user builds it. The Go
// build cache makes it quick after the test binary itself was built. Tests
// that run the operator or lmctl as processes build them with it.
func GoBuild(srcRoot, pkg, out string) error {
	build := exec.Command("go", "build", "-o", out, pkg)
	build.Dir = srcRoot
	if output, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s in %s: %w\n%s", pkg, srcRoot, err, output)
	}
	return nil
}

// Command is a binary under test started the way the clusters' own processes are: it dies
// with the test binary however that ends (see startOnLauncherThread), runs in a process
// group of its own, and appends stdout and stderr to a log file. Tests use it for processes
// they kill on purpose, such as the operator killed mid-install.
type Command struct {
	p *process
}

// StartCommand starts the binary at path with args, its output appended to logPath. A log
// shared by several runs (a restarted command) keeps every run's lines; LogTail and
// ExitError read only this run's.
func StartCommand(path string, args []string, logPath string) (*Command, error) {
	return StartCommandWithEnv(path, args, nil, logPath)
}

// StartCommandWithEnv is StartCommand with env ("NAME=value") added to the test binary's
// environment, as a container's env adds to its image's.
func StartCommandWithEnv(path string, args, env []string, logPath string) (*Command, error) {
	p, err := startProcessWithEnv(filepath.Base(path), path, args, env, logPath)
	if err != nil {
		return nil, err
	}
	return &Command{p: p}, nil
}

// Kill sends SIGKILL to the command's process group, as a crash or an OOM kill would end
// it, and returns once the process has exited. Killing an exited command does nothing.
func (c *Command) Kill() error { return c.p.stop() }

// Terminate sends SIGTERM to the command's process group, as the kubelet stops a container
// (graceful shutdown), and returns at once: Exited tells when the command has gone.
// Terminating an exited command does nothing.
func (c *Command) Terminate() error {
	if !c.p.running() {
		return nil
	}
	if err := syscall.Kill(-c.p.pid(), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("terminating %s (pid %d): %w", c.p.name, c.p.pid(), err)
	}
	return nil
}

// Exited is closed once the command has exited and been reaped.
func (c *Command) Exited() <-chan struct{} { return c.p.exited }

// Running reports whether the command has not exited.
func (c *Command) Running() bool { return c.p.running() }

// Pid is the command's process ID.
func (c *Command) Pid() int { return c.p.pid() }

// ExitError says why the command exited, with the end of its log; nil while it runs.
func (c *Command) ExitError() error {
	if c.p.running() {
		return nil
	}
	return c.p.exitError()
}

// Log returns what this run of the command wrote: a log shared with earlier runs (the same
// path in a test run with -count) holds their lines too, which are not this run's.
func (c *Command) Log() ([]byte, error) { return c.p.log() }

// LogTail returns the last n lines this run of the command wrote.
func (c *Command) LogTail(n int) string { return c.p.lastLines(n) }

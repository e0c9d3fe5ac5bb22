package dev

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// testBinaries are the control-plane binaries testcluster runs.
var testBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// modulePath identifies the repository's go.mod, as in testcluster: lmctl dev
// runs from a checkout, and finds bin/, the Makefile and the CRDs there.
const modulePath = "github.com/runtime-fleet/lifecycle-manager"

// ensureBinaries builds the control-plane binaries, or reuses them when they
// are up to date. The build is `make testbin`, so that the pinned versions
// live in one place (the Makefile); lmctl adds what make does not show: that
// a first build is running, and how far it got.
//
// When $LM_TESTBIN_DIR points somewhere else than the checkout's bin/ (make
// would build into bin/ regardless), the binaries are only looked for.
func ensureBinaries(ctx context.Context, out io.Writer, tty bool) error {
	root, rootErr := repoRoot()
	dir := os.Getenv(testcluster.BinDirEnv)
	switch {
	case rootErr == nil && (dir == "" || sameDir(dir, filepath.Join(root, "bin"))):
		if _, err := exec.LookPath("make"); err == nil {
			return buildBinaries(ctx, root, out, tty)
		}
		dir = filepath.Join(root, "bin")
	case dir == "":
		return fmt.Errorf("finding the control-plane binaries: run lmctl dev inside a checkout of %s, or set %s: %w",
			modulePath, testcluster.BinDirEnv, rootErr)
	}
	var missing []string
	for _, b := range testBinaries {
		if info, err := os.Stat(filepath.Join(dir, b)); err != nil || info.Mode().Perm()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control-plane binaries %s missing in %s: run `make testbin` in the checkout", strings.Join(missing, ", "), dir)
	}
	return nil
}

// buildBinaries runs `make testbin`, which returns at once when the binaries
// are current. A real build prints a line per compiled package (GOFLAGS=-v
// reaches the `go build` in hack/testbin.sh); those lines become a progress
// line here, and everything else is passed through.
func buildBinaries(ctx context.Context, root string, out io.Writer, tty bool) error {
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-s", "testbin")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(goflags()+" -v"))
	// Its own process group, so that a cancelled build stops the whole tree
	// (make, the script, go build and the compilers), not only make.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running make testbin: %w", err)
	}
	waitErr := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		_ = pw.Close()
		waitErr <- err
	}()

	p := buildProgress{out: out, tty: tty, start: time.Now()}
	s := bufio.NewScanner(pr)
	for s.Scan() {
		p.line(s.Text())
	}
	p.done()
	if err := <-waitErr; err != nil {
		return fmt.Errorf("building the control-plane binaries (make testbin) failed: %w; its output:\n%s", err, p.tail.String())
	}
	return nil
}

// goflags is the GOFLAGS go would use: setting the variable for the build
// must not drop what `go env -w GOFLAGS=...` configured.
func goflags() string {
	out, err := exec.Command("go", "env", "GOFLAGS").Output()
	if err != nil {
		return os.Getenv("GOFLAGS")
	}
	return strings.TrimSpace(string(out))
}

// buildProgress turns `go build -v` output into one updating line.
type buildProgress struct {
	out      io.Writer
	tty      bool
	start    time.Time
	packages int
	lastNote time.Time
	drawn    bool
	// tail keeps what was not a package name, for the error message.
	tail bytes.Buffer
}

// progressNoteEvery is how often a non-terminal gets a "still building" line:
// often enough for CI logs to show life, rarely enough to stay readable.
const progressNoteEvery = 30 * time.Second

func (p *buildProgress) line(line string) {
	if isPackageLine(line) {
		p.packages++
		elapsed := time.Since(p.start).Round(time.Second)
		if p.tty {
			fmt.Fprintf(p.out, "\r\x1b[2K  compiling: %s, %s  %s", plural(p.packages, "package"), elapsed, truncate(line, 60))
			p.drawn = true
		} else if time.Since(p.lastNote) >= progressNoteEvery {
			p.lastNote = time.Now()
			fmt.Fprintf(p.out, "  compiling: %s so far, %s\n", plural(p.packages, "package"), elapsed)
		}
		return
	}
	p.clear()
	fmt.Fprintln(p.out, line)
	p.tail.WriteString(line + "\n")
}

func (p *buildProgress) done() {
	p.clear()
	if p.packages > 0 {
		fmt.Fprintf(p.out, "  compiled %s in %s\n", plural(p.packages, "package"), time.Since(p.start).Round(time.Second))
	}
}

func (p *buildProgress) clear() {
	if p.drawn {
		fmt.Fprint(p.out, "\r\x1b[2K")
		p.drawn = false
	}
}

// isPackageLine tells `go build -v` package names (one import path, no
// spaces) from the script's sentences and compiler errors.
func isPackageLine(line string) bool {
	return line != "" && !strings.ContainsAny(line, " \t:") && !strings.HasPrefix(line, "#")
}

// repoRoot walks up from the working directory to the checkout's root.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting the working directory: %w", err)
	}
	for {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

func declaresModule(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}

func sameDir(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return os.SameFile(ia, ib)
}

// truncate cuts s to n characters, marking the cut; n <= 0 means no limit.
func truncate(s string, n int) string {
	r := []rune(s)
	if n <= 0 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

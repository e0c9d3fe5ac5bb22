package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinDirEnv names the environment variable that points at the directory holding the
// control-plane binaries. The Makefile exports it so that tests started by make, from an IDE
// with the same environment, or from a checkout elsewhere all run the same pinned binaries.
const BinDirEnv = "LM_TESTBIN_DIR"

// modulePath identifies this repository's go.mod when walking up from the working directory;
// `go test` runs in the package directory, so the repository root is some parent of it.
const modulePath = "github.com/runtime-fleet/lifecycle-manager"

// Names of the binaries `make testbin` builds into bin/.
const (
	binEtcd                  = "etcd"
	binKubeAPIServer         = "kube-apiserver"
	binKubeControllerManager = "kube-controller-manager"
	binKubeScheduler         = "kube-scheduler"
	binKwok                  = "kwok"
)

// binaryPath returns the absolute path of one control-plane binary, or an error that tells
// the reader how to get it: a missing binary is the most common first-run failure and
// should not look like a bug in the code under test.
func binaryPath(name string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("control-plane binary %s not found in %s (run `make testbin` to build it): %w", name, dir, err)
	}
	if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("control-plane binary %s is not executable (run `make testbin` to build it)", path)
	}
	return path, nil
}

// binDir is $LM_TESTBIN_DIR when set, else <repository root>/bin.
func binDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("locating control-plane binaries (set %s or run inside the repository): %w", BinDirEnv, err)
	}
	return filepath.Join(root, "bin"), nil
}

// defaultCRDDir is where controller-gen writes the project's CRDs (`make manifests`).
func defaultCRDDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("locating the project's CRDs: %w", err)
	}
	return filepath.Join(root, "config", "crd", "bases"), nil
}

// RepoRoot walks up from the working directory to the directory whose go.mod declares this
// module. Other go.mod files on the way (api/, hack/tools/) belong to nested modules and are
// skipped.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting the working directory: %w", err)
	}
	for {
		ok, err := declaresModule(filepath.Join(dir, "go.mod"))
		if err != nil {
			return "", err
		}
		if ok {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod declaring module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod at path declares this repository's module.
func declaresModule(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath, nil
		}
	}
	return false, s.Err()
}

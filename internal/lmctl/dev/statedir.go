package dev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ownerFile marks a directory as a dev session's state directory and holds
// the PID of the lmctl that uses it. Only a directory carrying it is ever
// emptied or removed, so that --dir pointing at the wrong place cannot cost
// anybody their files.
const ownerFile = "lmctl-dev.pid"

// stateDir is where a dev session keeps everything it writes: kubeconfigs,
// the operator's log, links to the clusters' directories.
type stateDir struct {
	path string
}

// newStateDir creates path, or a fresh temporary directory when path is
// empty. An existing directory is taken only when it is empty or was left by
// an earlier lmctl dev --keep that no longer runs; what that one kept is
// removed first.
func newStateDir(path string) (*stateDir, error) {
	if path == "" {
		dir, err := os.MkdirTemp("", "lmctl-dev-")
		if err != nil {
			return nil, fmt.Errorf("creating the state directory: %w", err)
		}
		return claim(dir)
	}
	dir, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving --dir %s: %w", path, err)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating the state directory: %w", err)
		}
		return claim(dir)
	case err != nil:
		return nil, fmt.Errorf("reading the state directory %s: %w", dir, err)
	case len(entries) == 0:
		return claim(dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not empty and was not made by lmctl dev; choose another --dir or empty it", dir)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid != os.Getpid() && alive(pid) {
		return nil, fmt.Errorf("%s is in use by another lmctl dev (pid %d); stop it or choose another --dir", dir, pid)
	}
	if err := removeKeptClusters(dir); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return nil, fmt.Errorf("clearing what an earlier lmctl dev kept in %s: %w", dir, err)
		}
	}
	return claim(dir)
}

// clusterDirPrefix starts the name of every directory testcluster creates.
const clusterDirPrefix = "testcluster-"

// removeKeptClusters removes the cluster directories a kept session linked
// from its state directory: they are over 100 MB each, and once the state
// directory is reused nothing points to them any more. Only link targets
// named like testcluster's directories are touched.
func removeKeptClusters(dir string) error {
	links, _ := filepath.Glob(filepath.Join(dir, "clusters", "*"))
	for _, link := range links {
		target, err := os.Readlink(link)
		if err != nil || !strings.HasPrefix(filepath.Base(target), clusterDirPrefix) {
			continue
		}
		if err := os.RemoveAll(target); err != nil {
			return fmt.Errorf("removing %s, which an earlier lmctl dev kept: %w", target, err)
		}
	}
	return nil
}

func claim(dir string) (*stateDir, error) {
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", ownerFile, err)
	}
	return &stateDir{path: dir}, nil
}

// file returns the path of a file in the state directory.
func (d *stateDir) file(name string) string {
	return filepath.Join(d.path, name)
}

// write writes a file readable by its owner only: kubeconfigs hold admin
// credentials.
func (d *stateDir) write(name string, data []byte) (string, error) {
	path := d.file(name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// link makes target (a cluster's directory, which testcluster creates in
// the system's temporary directory) reachable from the state directory, so
// that everything of a session is found in one place.
func (d *stateDir) link(name, target string) error {
	dir := d.file("clusters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("linking %s: %w", target, err)
	}
	return nil
}

// remove deletes the state directory. Links are removed, not followed:
// the clusters' directories are testcluster's to remove. A kept directory
// keeps its ownerFile, whose PID is then dead, so that the next lmctl dev
// with the same --dir may clear and reuse it.
func (d *stateDir) remove() error {
	if err := os.RemoveAll(d.path); err != nil {
		return fmt.Errorf("removing the state directory %s: %w", d.path, err)
	}
	return nil
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

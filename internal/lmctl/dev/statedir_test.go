package dev

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestNewStateDir(t *testing.T) {
	write := func(t *testing.T, dir, name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		wantErr string
		// kept lists files that must survive newStateDir.
		kept []string
	}{
		{name: "a missing directory is created", prepare: func(t *testing.T, dir string) { _ = os.Remove(dir) }},
		{name: "an empty directory is taken"},
		{
			name:    "a directory with someone's files is refused and left alone",
			prepare: func(t *testing.T, dir string) { write(t, dir, "thesis.tex", "years of work") },
			wantErr: "not made by lmctl dev",
			kept:    []string{"thesis.tex"},
		},
		{
			name: "a directory an earlier, finished session kept is cleared and reused",
			prepare: func(t *testing.T, dir string) {
				write(t, dir, ownerFile, strconv.Itoa(deadPID(t)))
				write(t, dir, "kcp.kubeconfig", "stale")
			},
		},
		{
			name: "a directory a running session uses is refused",
			prepare: func(t *testing.T, dir string) {
				write(t, dir, ownerFile, strconv.Itoa(os.Getppid()))
				write(t, dir, "kcp.kubeconfig", "live")
			},
			wantErr: "in use by another lmctl dev",
			kept:    []string{"kcp.kubeconfig"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.prepare != nil {
				tt.prepare(t, dir)
			}
			d, err := newStateDir(dir)
			for _, name := range tt.kept {
				if _, statErr := os.Stat(filepath.Join(dir, name)); statErr != nil {
					t.Errorf("%s is gone: %v", name, statErr)
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("newStateDir error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 || entries[0].Name() != ownerFile {
				t.Fatalf("state directory holds %v, want only %s", entries, ownerFile)
			}
			if err := d.remove(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("state directory still there after remove: %v", err)
			}
		})
	}
}

func TestNewStateDirRemovesClustersAKeptSessionLeft(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "state")
	kept := filepath.Join(tmp, "testcluster-runtime-123")
	other := filepath.Join(tmp, "photos")
	for _, d := range []string{filepath.Join(dir, "clusters"), kept, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(deadPID(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"runtime-0": kept, "odd": other} {
		if err := os.Symlink(target, filepath.Join(dir, "clusters", name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newStateDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Errorf("the kept cluster directory is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a link target not made by testcluster was touched: %v", err)
	}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

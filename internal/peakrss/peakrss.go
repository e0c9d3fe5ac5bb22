// Package peakrss reads and resets this process's peak resident memory
// (Linux VmHWM), for tests that bound what the process held at most.
package peakrss

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Reset sets this process's peak RSS to its current RSS (clear_refs 5) and
// returns it, so that a later Read measures only what came after. It skips
// the test where that cannot be done (not Linux).
func Reset(t testing.TB) int64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS (Linux only): %v", err)
	}
	return Read(t)
}

// Read is VmHWM from /proc/self/status, in bytes.
func Read(t testing.TB) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

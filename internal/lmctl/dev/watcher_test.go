package dev

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// Local runtimes report through their runtime-watcher, so the fleet keeps
// the production Ready interval; an attached cluster cannot reach a
// loopback agent, so its Kyma pauses reporting (the operator installs
// nothing of the watcher there), the session looks every 15 s, and the
// output says why.
func TestAttachedRuntimesGetNoWatcher(t *testing.T) {
	w := &runtimeWatchers{listenerAddress: "127.0.0.1:8443"}
	tests := []struct {
		name      string
		runtimes  []*runtimeTarget
		ready     time.Duration
		paused    []string
		wantLines []string
	}{
		{
			name:      "local runtimes",
			runtimes:  []*runtimeTarget{{Name: "runtime-0"}, {Name: "runtime-1"}},
			ready:     requeue.DefaultIntervals().Ready,
			wantLines: []string{"Started a runtime-watcher for runtime-0, runtime-1, reporting changes to the operator's listener at https://127.0.0.1:8443."},
		},
		{
			name:     "an attached cluster and a local runtime",
			runtimes: []*runtimeTarget{{Name: "runtime-0", Attached: true}, {Name: "runtime-1"}},
			ready:    15 * time.Second,
			paused:   []string{"runtime-0"},
			wantLines: []string{
				"Started a runtime-watcher for runtime-1, reporting changes to the operator's listener at https://127.0.0.1:8443.",
				"No runtime-watcher for runtime-0: an attached cluster cannot call this machine's loopback address; changes made there are picked up every 15s.",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attached := false
			var paused []string
			for _, rt := range tt.runtimes {
				attached = attached || rt.Attached
				if newKyma(Namespace, rt, nil).Labels[v1beta2.WatcherPausedLabel] == "true" {
					paused = append(paused, rt.Name)
				}
			}
			if strings.Join(paused, ",") != strings.Join(tt.paused, ",") {
				t.Errorf("Kymas with reporting paused: %v, want %v", paused, tt.paused)
			}
			intervals := devIntervals(attached)
			if intervals.Ready != tt.ready {
				t.Errorf("Ready interval %s, want %s", intervals.Ready, tt.ready)
			}
			var out bytes.Buffer
			describeWatchers(&out, tt.runtimes, w, intervals)
			if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(tt.wantLines, "\n") {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), strings.Join(tt.wantLines, "\n"))
			}
		})
	}
}

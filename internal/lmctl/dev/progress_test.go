package dev

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/status"
)

func fleet(runtimes ...status.Runtime) status.Fleet {
	for i := range runtimes {
		rt := &runtimes[i]
		rt.ModulesTotal = len(rt.Modules)
		for _, m := range rt.Modules {
			if m.State == v1beta2.StateReady {
				rt.ModulesReady++
			}
		}
	}
	return status.Fleet{Runtimes: runtimes}
}

func rt(name string, state v1beta2.State, modules ...status.Module) status.Runtime {
	return status.Runtime{Name: name, State: state, Modules: modules}
}

func mod(name string, state v1beta2.State, version, message string) status.Module {
	return status.Module{Name: name, State: state, Version: version, Message: message}
}

func TestTrackerObserve(t *testing.T) {
	t0 := time.Now()
	steps := []struct {
		name  string
		fleet status.Fleet
		want  []string
	}{
		{
			name:  "everything seen first is a change",
			fleet: fleet(rt("r0", "", mod("a", "", "", ""), mod("b", "", "", ""))),
			want:  []string{"r0/a ->", "r0/b ->"},
		},
		{
			name:  "a state change is a change; an unchanged module is not",
			fleet: fleet(rt("r0", v1beta2.StateProcessing, mod("a", v1beta2.StateProcessing, "1.0.0", "Installing"), mod("b", "", "", ""))),
			want:  []string{"r0/a ->Processing"},
		},
		{
			name:  "a new message alone is not a change",
			fleet: fleet(rt("r0", v1beta2.StateProcessing, mod("a", v1beta2.StateProcessing, "1.0.0", "Waiting for the Deployment"), mod("b", "", "", ""))),
			want:  nil,
		},
		{
			name:  "a version change is a change",
			fleet: fleet(rt("r0", v1beta2.StateProcessing, mod("a", v1beta2.StateProcessing, "2.0.0", ""), mod("b", "", "", ""))),
			want:  []string{"r0/a Processing->Processing"},
		},
		{
			name:  "a module gone from the Kyma is a removal",
			fleet: fleet(rt("r0", v1beta2.StateProcessing, mod("a", v1beta2.StateReady, "2.0.0", ""))),
			want:  []string{"r0/a Processing->Ready", "r0/b -> removed"},
		},
	}
	tr := newTracker()
	for i, step := range steps {
		changes := tr.observe(t0.Add(time.Duration(i)*time.Second), step.fleet)
		var got []string
		for _, c := range changes {
			line := c.key.String() + " " + string(c.from) + "->" + string(c.to)
			if c.removed {
				line += " removed"
			}
			got = append(got, line)
		}
		if !reflect.DeepEqual(got, step.want) {
			t.Fatalf("step %q: changes %q, want %q", step.name, got, step.want)
		}
	}
}

func TestTrackerStuck(t *testing.T) {
	t0 := time.Now()
	grace := 20 * time.Second
	errorFleet := func(message string) status.Fleet {
		return fleet(rt("r0", v1beta2.StateError, mod("broken", v1beta2.StateError, "1.0.0", message), mod("ok", v1beta2.StateReady, "1.0.0", "")))
	}
	tr := newTracker()
	tr.observe(t0, errorFleet("rendering rawManifest: yaml"))
	if got := tr.stuck(t0.Add(grace-time.Second), grace); len(got) != 0 {
		t.Fatalf("stuck before the grace period: %v", got)
	}
	// A new message means something moved: the clock starts again.
	tr.observe(t0.Add(10*time.Second), errorFleet("fetching content: 503"))
	if got := tr.stuck(t0.Add(grace+time.Second), grace); len(got) != 0 {
		t.Fatalf("stuck although the message changed 11s ago: %v", got)
	}
	want := []moduleKey{{"r0", "broken"}}
	if got := tr.stuck(t0.Add(10*time.Second+grace), grace); !reflect.DeepEqual(got, want) {
		t.Fatalf("stuck = %v, want %v", got, want)
	}
	// Leaving Error clears it.
	tr.observe(t0.Add(40*time.Second), fleet(rt("r0", v1beta2.StateProcessing, mod("broken", v1beta2.StateProcessing, "1.0.1", ""))))
	if got := tr.stuck(t0.Add(time.Hour), grace); len(got) != 0 {
		t.Fatalf("stuck after leaving Error: %v", got)
	}
}

func TestFormatChange(t *testing.T) {
	key := moduleKey{"runtime-0", "sample"}
	tests := []struct {
		name string
		c    change
		want string
	}{
		{"not reported yet", change{key: key}, "    4.2s  runtime-0    sample       Pending    -"},
		{"Ready shows no message", change{key: key, to: v1beta2.StateReady, version: "1.0.0", message: "old"}, "    4.2s  runtime-0    sample       Ready      1.0.0"},
		{"Error shows why, on one line", change{key: key, to: v1beta2.StateError, version: "1.0.0", message: "rendering:\n yaml"},
			"    4.2s  runtime-0    sample       Error      1.0.0  rendering: yaml"},
		{"removed", change{key: key, from: v1beta2.StateReady, version: "1.0.0", removed: true}, "    4.2s  runtime-0    sample       removed    1.0.0"},
		{"removed before the operator saw it", change{key: key, removed: true}, "    4.2s  runtime-0    sample       removed    -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatChange("4.2s", tt.c); got != tt.want {
				t.Fatalf("formatChange:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestRenderProgress(t *testing.T) {
	f := fleet(
		rt("runtime-0", v1beta2.StateProcessing, mod("chart", v1beta2.StateReady, "1.0.0", ""), mod("sample", v1beta2.StateProcessing, "1.0.0", "Deployment kyma-system/sample-manager is not ready")),
		rt("runtime-1", "", mod("chart", "", "", ""), mod("sample", "", "", "")),
	)
	got := renderProgress(f, 3500*time.Millisecond, 0)
	want := []string{
		"Waiting for 4 modules in 2 runtimes to be Ready  [#####...............] 1/4  3.5s",
		"  RUNTIME    MODULE  VERSION  STATE       MESSAGE",
		"  runtime-0  chart   1.0.0    Ready",
		"  runtime-0  sample  1.0.0    Processing  Deployment kyma-system/sample-manager is not ready",
		"  runtime-1  chart   -        Pending",
		"  runtime-1  sample  -        Pending",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("renderProgress:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// On a narrow terminal no line may wrap, or the redraw would drift.
	for _, line := range renderProgress(f, time.Second, 40) {
		if n := len([]rune(line)); n > 40 {
			t.Fatalf("line of %d characters on a 40-column terminal: %q", n, line)
		}
	}
}

func TestNotReadyReport(t *testing.T) {
	unreachable := rt("runtime-1", v1beta2.StateError)
	unreachable.Message = "The runtime cannot be reached"
	f := fleet(
		rt("runtime-0", v1beta2.StateError,
			mod("broken", v1beta2.StateError, "1.0.0", "rendering rawManifest: yaml"),
			mod("off", v1beta2.StateUnmanaged, "1.0.0", "not managed"),
			mod("sample", v1beta2.StateReady, "1.0.0", "")),
		unreachable,
	)
	want := []string{
		"runtime-0/broken Error: rendering rawManifest: yaml",
		"runtime-1 Error: The runtime cannot be reached",
	}
	if got := notReadyReport(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("notReadyReport = %q, want %q", got, want)
	}
}

func TestAllReady(t *testing.T) {
	ready := rt("runtime-0", v1beta2.StateReady, mod("a", v1beta2.StateReady, "1.0.0", ""))
	tests := []struct {
		name     string
		fleet    status.Fleet
		runtimes int
		want     bool
	}{
		{"every runtime Ready", fleet(ready), 1, true},
		{"a Kyma not created yet", fleet(ready), 2, false},
		{"a runtime without modules has nothing to show yet", fleet(rt("runtime-0", v1beta2.StateReady)), 1, false},
		{"a module not Ready", fleet(rt("runtime-0", v1beta2.StateReady, mod("a", v1beta2.StateProcessing, "1.0.0", ""))), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := allReady(tt.fleet, tt.runtimes); got != tt.want {
				t.Fatalf("allReady = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsPackageLine(t *testing.T) {
	for line, want := range map[string]bool{
		"k8s.io/apiserver/pkg/server":                         true,
		"go.etcd.io/etcd/server/v3/etcdserver":                true,
		"Building test control-plane binaries into /work/bin": false,
		"# k8s.io/kubernetes/cmd/kube-apiserver":              false,
		"./main.go:3:2: undefined: x":                         false,
		"":                                                    false,
	} {
		if got := isPackageLine(line); got != want {
			t.Errorf("isPackageLine(%q) = %v, want %v", line, got, want)
		}
	}
}

func TestBuildProgress(t *testing.T) {
	lines := []string{
		"Building test control-plane binaries into /repo/bin (kubernetes=v1.37.2).",
		"internal/goarch",
		"k8s.io/apiserver/pkg/server",
		"Built kube-apiserver in 300s.",
	}
	t.Run("terminal: one line redrawn in place, sentences passed through", func(t *testing.T) {
		var out strings.Builder
		p := buildProgress{out: &out, tty: true, start: time.Now()}
		for _, l := range lines {
			p.line(l)
		}
		p.done()
		got := out.String()
		for _, want := range []string{
			lines[0] + "\n",
			"\r\x1b[2K  compiling: 2 packages, 0s  k8s.io/apiserver/pkg/server",
			"\r\x1b[2K" + lines[3] + "\n",
			"  compiled 2 packages in 0s\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output %q lacks %q", got, want)
			}
		}
	})
	t.Run("not a terminal: no escape sequences", func(t *testing.T) {
		var out strings.Builder
		p := buildProgress{out: &out, start: time.Now()}
		for _, l := range lines {
			p.line(l)
		}
		p.done()
		if got := out.String(); strings.Contains(got, "\x1b") || !strings.Contains(got, "compiling: 1 package so far") {
			t.Errorf("output %q: want plain lines with a first progress note", got)
		}
	})
}

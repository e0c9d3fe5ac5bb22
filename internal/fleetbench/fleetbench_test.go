package fleetbench

import (
	"maps"
	"regexp"
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestModuleNamesAreValidAndDistinct(t *testing.T) {
	// The ModuleTemplate and ModuleReleaseMeta CRDs refuse other names.
	pattern := regexp.MustCompile(`^([a-z]{3,}(-[a-z]{3,})*)?$`)
	names := ModuleNames(maxModules)
	seen := map[string]bool{}
	for _, n := range names {
		if !pattern.MatchString(n) {
			t.Errorf("module name %q does not match the CRD pattern", n)
		}
		if seen[n] {
			t.Errorf("module name %q repeats", n)
		}
		seen[n] = true
	}
	if got := ModuleNames(3); len(got) != 3 || got[0] != "bench-alpha" || got[2] != "bench-charlie" {
		t.Errorf("ModuleNames(3) = %v", got)
	}
}

func TestParseRequests(t *testing.T) {
	metrics := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="operator.kyma-project.io",resource="manifests",scope="resource",subresource="",verb="APPLY",version="v1beta2"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="operator.kyma-project.io",resource="manifests",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 20
apiserver_request_total{code="200",component="apiserver",dry_run="All",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 5
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 300
# HELP apiserver_request_duration_seconds whatever
# TYPE apiserver_request_duration_seconds counter
apiserver_request_duration_seconds{verb="POST"} 1000
`
	got, err := parseRequests([]byte(metrics))
	if err != nil {
		t.Fatal(err)
	}
	want := Requests{Writes: 62, DryRuns: 7, Reads: 105, WritesByResource: map[string]float64{
		"manifests": 40, "manifests/status": 20, "configmaps": 2,
	}, ReadsByResource: map[string]float64{"GET configmaps": 100, "LIST configmaps": 5}}
	if got.Writes != want.Writes || got.DryRuns != want.DryRuns || got.Reads != want.Reads {
		t.Errorf("parseRequests = writes %v dry-runs %v reads %v, want %v %v %v", got.Writes, got.DryRuns, got.Reads, want.Writes, want.DryRuns, want.Reads)
	}
	if len(got.WritesByResource) != len(want.WritesByResource) {
		t.Errorf("WritesByResource = %v, want %v", got.WritesByResource, want.WritesByResource)
	}
	for k, v := range want.WritesByResource {
		if got.WritesByResource[k] != v {
			t.Errorf("WritesByResource[%s] = %v, want %v", k, got.WritesByResource[k], v)
		}
	}

	if !maps.Equal(got.ReadsByResource, want.ReadsByResource) {
		t.Errorf("ReadsByResource = %v, want %v", got.ReadsByResource, want.ReadsByResource)
	}
	// Over an interval and over several API servers.
	later := got.Add(Requests{ReadsByResource: map[string]float64{"GET configmaps": 10, "GET kymas": 3}})
	if d := later.Sub(got); !maps.Equal(d.ReadsByResource, map[string]float64{"GET configmaps": 10, "GET kymas": 3}) || d.Reads != 0 {
		t.Errorf("Add then Sub = %v (reads %v), want the added counts by resource", d.ReadsByResource, d.Reads)
	}

	if _, err := parseRequests([]byte("not { metrics")); err == nil {
		t.Error("parseRequests accepted garbage")
	}
}

func TestRequestsSubAndAdd(t *testing.T) {
	before := Requests{Writes: 10, DryRuns: 1, Reads: 5, WritesByResource: map[string]float64{"a": 4, "b": 6}}
	after := Requests{Writes: 25, DryRuns: 3, Reads: 9, WritesByResource: map[string]float64{"a": 4, "b": 16, "c": 5}}
	d := after.Sub(before)
	if d.Writes != 15 || d.DryRuns != 2 || d.Reads != 4 || len(d.WritesByResource) != 2 || d.WritesByResource["b"] != 10 || d.WritesByResource["c"] != 5 {
		t.Errorf("Sub = %+v", d)
	}
	s := Requests{}.Add(d).Add(d)
	if s.Writes != 30 || s.WritesByResource["c"] != 10 {
		t.Errorf("Add = %+v", s)
	}
}

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (kube (api) server) S 17 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 12 0 500 1000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	got, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got.comm != "kube (api) server" || got.ppid != 17 || got.cpuSeconds != 3.8 || got.rssPages != 3000 {
		t.Errorf("parseStat = %+v", got)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S notanumber 1 1"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted a malformed line", bad)
		}
	}
}

func TestGoalCheck(t *testing.T) {
	ready := func(version string, gen int64) moduleView {
		return moduleView{name: "m", version: version, state: v1beta2.StateReady, manifestGeneration: gen}
	}
	tests := []struct {
		name      string
		goal      goal
		view      kymaView
		wantDone  bool
		wantStale bool
	}{
		{"install done", goal{version: "1.0.0", modules: 1},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("1.0.0", 1)}}, true, false},
		{"Kyma not Ready", goal{version: "1.0.0", modules: 1},
			kymaView{state: v1beta2.StateProcessing, modules: []moduleView{ready("1.0.0", 1)}}, false, false},
		{"a module missing", goal{version: "1.0.0", modules: 2},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("1.0.0", 1)}}, false, false},
		{"old version", goal{version: "2.0.0", modules: 1, baseline: map[string]int64{"m": 1}},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("1.0.0", 1)}}, false, false},
		{"module not Ready", goal{version: "1.0.0", modules: 1},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{{name: "m", version: "1.0.0", state: v1beta2.StateProcessing}}}, false, false},
		{"upgraded from a newer Manifest", goal{version: "2.0.0", modules: 1, baseline: map[string]int64{"m": 1}},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("2.0.0", 2)}}, true, false},
		{"new version from the old Manifest", goal{version: "2.0.0", modules: 1, baseline: map[string]int64{"m": 1}},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("2.0.0", 1)}}, false, true},
		{"one module moved, the other Ready at its own version", goal{version: "3.0.0", modules: 2, module: "m", baseline: map[string]int64{"m": 1, "o": 1}},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("3.0.0", 2), {name: "o", version: "2.0.0", state: v1beta2.StateReady, manifestGeneration: 1}}}, true, false},
		{"one module moved, the other not Ready", goal{version: "3.0.0", modules: 2, module: "m", baseline: map[string]int64{"m": 1}},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("3.0.0", 2), {name: "o", version: "2.0.0", state: v1beta2.StateError}}}, false, false},
		{"the moved module still at its old version", goal{version: "3.0.0", modules: 2, module: "m", baseline: map[string]int64{"m": 1}},
			kymaView{state: v1beta2.StateReady, modules: []moduleView{ready("2.0.0", 1), {name: "o", version: "2.0.0", state: v1beta2.StateReady}}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, stale := tt.goal.check(tt.view)
			if done != tt.wantDone || stale != tt.wantStale {
				t.Errorf("check = done %v stale %v, want %v %v", done, stale, tt.wantDone, tt.wantStale)
			}
		})
	}
}

func TestTrackerRecordsFirstCompletionPerPhase(t *testing.T) {
	tr := newTracker(2)
	kyma := func(name, version string, gen int64, state v1beta2.State) *v1beta2.Kyma {
		k := &v1beta2.Kyma{}
		k.Name = name
		k.Status.State = state
		k.Status.Modules = []v1beta2.ModuleStatus{{Name: "m", Version: version, State: state,
			Manifest: &v1beta2.TrackingObject{PartialMeta: v1beta2.PartialMeta{Generation: gen}}}}
		return k
	}
	install := tr.begin(goal{version: "1.0.0", modules: 1}, false)
	tr.observe(kyma("a", "1.0.0", 1, v1beta2.StateReady))
	tr.observe(kyma("b", "1.0.0", 1, v1beta2.StateProcessing))
	if tr.progress() != 1 {
		t.Fatalf("progress = %d, want 1", tr.progress())
	}
	tr.observe(kyma("b", "1.0.0", 1, v1beta2.StateReady))
	select {
	case <-install.finished:
	default:
		t.Fatal("install did not finish with every Kyma Ready")
	}
	done, _ := tr.end()
	if len(done) != 2 {
		t.Fatalf("install done = %v", done)
	}

	upgrade := tr.begin(goal{version: "2.0.0", modules: 1}, true)
	tr.observe(kyma("a", "2.0.0", 1, v1beta2.StateReady)) // stale
	tr.observe(kyma("a", "2.0.0", 2, v1beta2.StateReady))
	tr.observe(kyma("b", "2.0.0", 1, v1beta2.StateReady)) // stale
	select {
	case <-upgrade.finished:
		t.Fatal("upgrade finished with a stale status")
	default:
	}
	if got := tr.notDone(5); len(got) != 1 {
		t.Errorf("notDone = %v, want kyma b only", got)
	}
	done, stale := tr.end()
	if len(done) != 1 || stale != 2 {
		t.Errorf("upgrade done = %v, stale = %d; want a done, 2 stale", done, stale)
	}
}

func TestRuntimeMajorFigures(t *testing.T) {
	// Runtime-major: Kymas finish one after another, evenly.
	if got := runtimeMajorIdeal(10*time.Second, 4); got != 6250*time.Millisecond {
		t.Errorf("runtimeMajorIdeal(10s, 4) = %v, want 6.25s", got)
	}
	p := &Phase{Converged: true}
	p.completionStats(map[string]time.Duration{"a": 2500 * time.Millisecond, "b": 5 * time.Second, "c": 7500 * time.Millisecond, "d": 10 * time.Second}, 10*time.Second)
	if p.RatioToIdeal != 1 || p.AverageKymaSeconds != 6.25 || p.MaxKymaSeconds != 10 || p.P50KymaSeconds != 5 {
		t.Errorf("even completions: %+v", p)
	}
	if p.CompletionCurve[1] != 0 || p.CompletionCurve[2] != 0.25 || p.CompletionCurve[4] != 0.5 || p.CompletionCurve[9] != 1 {
		t.Errorf("completion curve = %v", p.CompletionCurve)
	}
	// Breadth-first: everyone finishes at the end.
	q := &Phase{Converged: true}
	q.completionStats(map[string]time.Duration{"a": 10 * time.Second, "b": 10 * time.Second, "c": 10 * time.Second, "d": 10 * time.Second}, 10*time.Second)
	if q.RatioToIdeal != 1.6 || q.CompletionCurve[8] != 0 {
		t.Errorf("bunched completions: ratio %v curve %v", q.RatioToIdeal, q.CompletionCurve)
	}
	// A phase cut short has no duration to compare with.
	r := &Phase{}
	r.completionStats(map[string]time.Duration{"a": time.Second}, time.Minute)
	if r.RatioToIdeal != 0 || r.CompletionCurve != nil || r.AverageKymaSeconds != 1 {
		t.Errorf("unconverged phase: %+v", r)
	}
}

func TestMinimalWritesAndEfficiency(t *testing.T) {
	kcp, rt := minimalWrites(phaseInstall, 1000, 20)
	if kcp != 41000 || rt != 42000 {
		t.Errorf("install minimal writes = %d, %d", kcp, rt)
	}
	kcp, rt = minimalWrites(phaseUpgrade, 1000, 20)
	if kcp != 41000 || rt != 20000 {
		t.Errorf("upgrade minimal writes = %d, %d", kcp, rt)
	}
	// 41,000 writes at 1,000/s take 41s; done in 82s is 50%.
	if got := efficiency(41000, 1000, 82); got != 0.5 {
		t.Errorf("efficiency = %v, want 0.5", got)
	}
	if got := efficiency(41000, 0, 82); got != 0 {
		t.Errorf("efficiency without a raw rate = %v, want 0", got)
	}
}

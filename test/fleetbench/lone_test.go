package fleetbench

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/fleetbench"
)

// TestLoneRuntimeBenchmarkReports runs the lone-runtime benchmark at a
// small size: every module's objects are applied and found in the runtime,
// the Kyma is Ready only once the last module is, and it is deleted with
// every module object. It asserts the figures' consistency, never their
// size.
func TestLoneRuntimeBenchmarkReports(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	opts := fleetbench.DefaultLoneOptions()
	opts.Modules, opts.Repetitions = 3, 1
	opts.Progress = testWriter{t}
	report, err := fleetbench.RunLone(ctx, opts)
	if err != nil {
		t.Fatalf("the benchmark failed: %v", err)
	}
	report.Print(testWriter{t})
	if report.Modules != 3 || report.Objects < 3*9 || report.Objects > 3*31 {
		t.Errorf("%d modules with %d objects, want 3 modules of 9 to 31 objects each", report.Modules, report.Objects)
	}
	if want := report.Objects - report.Modules; report.Synced != want {
		t.Errorf("the Manifests list %d objects applied, want every object the modules ship but their default CRs: %d", report.Synced, want)
	}
	for name, d := range map[string]fleetbench.Durations{"ready": report.Ready, "applied": report.Applied, "reaction": report.Reaction, "delete": report.Delete} {
		if len(d.Samples) != 1 || d.Min < 0 || (name != "reaction" && d.Min == 0) {
			t.Errorf("%s: samples %v, want one positive", name, d.Samples)
		}
	}
	if report.InRuntime != report.Objects {
		t.Errorf("%d of the modules' %d objects were in the runtime when the Kyma was Ready, want all", report.InRuntime, report.Objects)
	}
	if report.Left != 0 {
		t.Errorf("%d of the modules' objects were left in the runtime, not being deleted, when the Kyma was gone, want none (being deleted counts as gone)", report.Left)
	}
	if got := len(report.CRAfterManager.Samples); got != report.Modules {
		t.Errorf("%d modules timed from their manager to their default CR, want %d", got, report.Modules)
	} else if report.CRAfterManager.Min < 0 {
		t.Errorf("a default CR was created %.3fs before its module's manager, want after: the content first", -report.CRAfterManager.Min)
	}
	if report.Ready.Max < report.Applied.Max {
		t.Errorf("the Kyma was Ready (%.3fs) before every default CR was applied (%.3fs)", report.Ready.Max, report.Applied.Max)
	}
}

// Package fleetbench runs the scale benchmark at a small size as part of
// `make test`, so that the benchmark keeps working between the releases it
// is run for (SPEC R14). It asserts correctness — every Kyma reaches Ready,
// the report's figures are consistent — and never timings: those belong to
// `make bench` and docs/performance.md.
package fleetbench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/fleetbench"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
)

const (
	kymas    = 10
	modules  = 3
	runtimes = 2
	// rolloutSoak is short: the test checks that waves wait for it, not
	// how a soak of minutes looks.
	rolloutSoak = 2 * time.Second
)

func TestSmallFleetConvergesAndReports(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	opts := fleetbench.DefaultOptions()
	opts.Kymas, opts.Modules, opts.Runtimes = kymas, modules, runtimes
	opts.RawWrites = 200
	opts.Idle = 2 * time.Second
	opts.SampleInterval = time.Second
	opts.Progress = testWriter{t}
	opts.Rollout = &fleetbench.RolloutOptions{Canary: 2, MaxInFlight: intstr.FromInt32(4), Soak: rolloutSoak}
	report, err := fleetbench.Run(ctx, opts)
	if err != nil {
		t.Fatalf("the benchmark failed: %v", err)
	}

	// Correctness: every Kyma reached Ready at each phase's version.
	if !report.Converged {
		t.Errorf("the report says the fleet did not converge: %s", report.Error)
	}
	for _, p := range []*fleetbench.Phase{report.Install, report.Upgrade} {
		if p == nil {
			t.Fatal("a phase is missing from the report")
		}
		if !p.Converged || p.KymasDone != kymas || p.KymasTotal != kymas {
			t.Errorf("%s: %d of %d Kymas done (converged %v), want all %d; not done: %v", p.Name, p.KymasDone, p.KymasTotal, p.Converged, kymas, p.NotDone)
		}
	}

	// The figures hang together.
	if report.Raw == nil || report.Raw.PerSecond <= 0 || report.Raw.Counted < float64(report.Raw.Writes) {
		t.Errorf("raw write rate: %+v; want a positive rate and at least %d writes counted by the API server", report.Raw, opts.RawWrites)
	}
	install, upgrade := report.Install, report.Upgrade
	if install.BenchWrites != 2*kymas {
		t.Errorf("install: the benchmark wrote %d objects, want a Secret and a Kyma per Kyma (%d)", install.BenchWrites, 2*kymas)
	}
	if upgrade.BenchWrites != modules {
		t.Errorf("upgrade: the benchmark wrote %d objects, want one ModuleReleaseMeta per module (%d)", upgrade.BenchWrites, modules)
	}
	for _, p := range []*fleetbench.Phase{install, upgrade} {
		if p.OperatorKCPWrites < float64(p.MinimalKCPWrites) {
			t.Errorf("%s: the operator wrote %v times to the control plane, fewer than the %d minimal writes", p.Name, p.OperatorKCPWrites, p.MinimalKCPWrites)
		}
		if p.Runtimes.Writes < float64(p.MinimalRuntimeWrites) {
			t.Errorf("%s: %v writes to runtimes, fewer than the %d minimal writes", p.Name, p.Runtimes.Writes, p.MinimalRuntimeWrites)
		}
		if p.Efficiency <= 0 || p.Efficiency > 1 || p.MachineEfficiency < p.Efficiency {
			t.Errorf("%s: efficiency %v, machine efficiency %v; want 0 < efficiency ≤ machine efficiency, efficiency ≤ 1", p.Name, p.Efficiency, p.MachineEfficiency)
		}
		if p.AverageKymaSeconds <= 0 || p.AverageKymaSeconds > p.MaxKymaSeconds || p.RuntimeMajorIdealSeconds <= 0 || p.RatioToIdeal <= 0 {
			t.Errorf("%s: completion figures inconsistent: %+v", p.Name, p)
		}
		if p.OperatorCPUSeconds <= 0 || p.KymaReconciles < kymas || p.ManifestReconciles < kymas*modules {
			t.Errorf("%s: operator CPU %v s, %v Kyma and %v Manifest reconciles", p.Name, p.OperatorCPUSeconds, p.KymaReconciles, p.ManifestReconciles)
		}
	}
	if got := install.KCP.WritesByResource["manifests"]; got < kymas*modules {
		t.Errorf("install: %v Manifest writes, want at least one per Manifest (%d)", got, kymas*modules)
	}
	if got := upgrade.Runtimes.WritesByResource["configmaps"]; got < kymas*modules {
		t.Errorf("upgrade: %v ConfigMap writes in runtimes, want at least the changed ConfigMap per Manifest (%d)", got, kymas*modules)
	}
	for _, name := range []string{"kcp/kube-apiserver", "kcp/etcd", "runtime-0/kube-apiserver", "runtime-1/etcd"} {
		if p, ok := report.Processes[name]; !ok || p.CPUSecondsByPhase["install"] <= 0 || p.PeakRSSBytes <= 0 {
			t.Errorf("process %s: %+v (present %v); want CPU in the install and a peak RSS", name, p, ok)
		}
	}
	if report.Idle == nil || report.Idle.Seconds < opts.Idle.Seconds() {
		t.Errorf("idle: %+v, want at least %s measured", report.Idle, opts.Idle)
	}
	if report.Memory.PeakHeapInuseBytes == 0 || report.Memory.MaxRSSBytes == 0 {
		t.Errorf("memory: %+v", report.Memory)
	}
	if m := report.Memory; m.Manifests != kymas*modules || m.RSSBytesPerManifest != m.MaxRSSBytes/int64(m.Manifests) {
		t.Errorf("memory per Manifest: %+v, want the max RSS divided by the %d Manifests created", m, kymas*modules)
	}

	// The operation history recorded each Manifest's install and upgrade.
	for _, p := range []*fleetbench.Phase{install, upgrade} {
		if p.History.Operations != kymas*modules || p.History.StatusWritesPerManifest < 1 {
			t.Errorf("%s: history %+v; want an operation for each of the %d Manifests, and at least the status write that reports it", p.Name, p.History, kymas*modules)
		}
	}
	checkRollout(t, report)

	// The JSON report carries the same figures under stable keys.
	data, err := json.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]any
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"scenario", "machine", "rawWrites", "install", "upgrade", "rollout", "idle", "memory", "processes"} {
		if _, ok := decoded[key]; !ok {
			t.Errorf("the JSON report has no %q", key)
		}
	}
	if kyma, _ := decoded["install"].(map[string]any)["kymasDone"].(float64); kyma != kymas {
		t.Errorf("JSON install.kymasDone = %v, want %d", kyma, kymas)
	}
}

// checkRollout checks the rollout phase: one module moved in the policy's
// waves (canary 2, then 4 and 4), each admitted only after the one before
// was Ready and soaked, every Kyma at the new version, and figures that
// add up: the total is the ideal for these waves plus the overhead.
func checkRollout(t *testing.T, report *fleetbench.Report) {
	t.Helper()
	r := report.Rollout
	if r == nil || r.Phase == nil {
		t.Fatal("the report has no rollout phase")
	}
	if p := r.Phase; !p.Converged || p.KymasDone != kymas {
		t.Errorf("rollout: %d of %d Kymas done (converged %v); not done: %v", p.KymasDone, p.KymasTotal, p.Converged, p.NotDone)
	}
	if r.Halted != "" {
		t.Errorf("rollout halted: %s", r.Halted)
	}
	wantWaves := []int{2, 4, 4}
	if !slices.Equal(r.PlannedWaves, wantWaves) {
		t.Errorf("planned waves %v, want %v", r.PlannedWaves, wantWaves)
	}
	sizes := []int{}
	for _, w := range r.Waves {
		sizes = append(sizes, w.Kymas)
	}
	if !slices.Equal(sizes, wantWaves) {
		t.Errorf("waves as run: %v Kymas each, want %v: %+v", sizes, wantWaves, r.Waves)
	}
	for i, w := range r.Waves {
		if w.StartSeconds <= 0 || w.ReadySeconds <= w.StartSeconds || w.UpgradeSeconds <= 0 {
			t.Errorf("wave %d: admitted at %vs, Ready at %vs", i, w.StartSeconds, w.ReadySeconds)
		}
		// Observed by the same watch in the order they were written: the
		// wave's Ready, then, a soak later, the next wave.
		if i > 0 && w.StartSeconds < r.Waves[i-1].ReadySeconds {
			t.Errorf("wave %d admitted at %vs, before wave %d was Ready at %vs", i, w.StartSeconds, i-1, r.Waves[i-1].ReadySeconds)
		}
	}
	if r.IdealSeconds < float64(len(wantWaves)-1)*rolloutSoak.Seconds() || r.TotalSeconds <= 0 || r.RatioToIdeal <= 0 {
		t.Errorf("rollout figures: total %vs, ideal %vs, ratio %v; the ideal holds at least the soaks", r.TotalSeconds, r.IdealSeconds, r.RatioToIdeal)
	}
	if diff := r.TotalSeconds - r.IdealSeconds - r.OverheadSeconds; diff > 1e-6 || diff < -1e-6 {
		t.Errorf("total %v ≠ ideal %v + overhead %v", r.TotalSeconds, r.IdealSeconds, r.OverheadSeconds)
	}
	// Only the rolled-out module's Manifests moved: one ConfigMap change
	// per Kyma in the runtimes, not one per module.
	if got := r.Phase.Runtimes.WritesByResource["configmaps"]; got < kymas || got >= kymas*modules {
		t.Errorf("rollout: %v ConfigMap writes in runtimes, want one module's (%d ≤ n < %d)", got, kymas, kymas*modules)
	}
	if r.Phase.History.Operations != kymas {
		t.Errorf("rollout: %d upgrades in the history, want one per Kyma (%d)", r.Phase.History.Operations, kymas)
	}
	if r.AtOnceSeconds != report.Upgrade.Seconds {
		t.Errorf("rollout: fleet-wide upgrade for comparison %v, want the upgrade phase's %v", r.AtOnceSeconds, report.Upgrade.Seconds)
	}
}

// TestShardedRolloutPhase runs the rollout phase with the operator split
// into three shards, shard 0 planning for all: the rollout runs the waves
// its policy makes (canary 2, then 4, 4 and 2) one after the other across
// the shards, every Kyma of every shard reaches the new version, and the
// report compares the total with the ideal at the install's measured speed.
func TestShardedRolloutPhase(t *testing.T) {
	const (
		shards       = 3
		shardedKymas = 12
	)
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// The fleet is spread over every shard.
	owners := map[int]int{}
	for i := range shardedKymas {
		owners[shard.Of(fmt.Sprintf("kyma-%05d", i), shards)]++
	}
	if len(owners) != shards {
		t.Fatalf("the %d Kymas fall into shards %v; want all %d", shardedKymas, owners, shards)
	}

	opts := fleetbench.DefaultOptions()
	opts.Kymas, opts.Modules, opts.Runtimes, opts.Shards = shardedKymas, 2, runtimes, shards
	opts.Upgrade, opts.Idle, opts.RawWrites = false, 0, 0
	opts.SampleInterval = time.Second
	opts.Progress = testWriter{t}
	opts.Rollout = &fleetbench.RolloutOptions{Canary: 2, MaxInFlight: intstr.FromInt32(4), Soak: rolloutSoak}
	report, err := fleetbench.Run(ctx, opts)
	if err != nil {
		t.Fatalf("the benchmark failed: %v", err)
	}
	if !report.Converged || report.Scenario.Shards != shards {
		t.Errorf("converged %v (%s), shards %d; want converged with %d shards", report.Converged, report.Error, report.Scenario.Shards, shards)
	}
	// Each shard's informers hold its own Kymas and Manifests alone.
	if len(report.Caches) != shards {
		t.Errorf("the report has the caches of %d shards, want %d", len(report.Caches), shards)
	}
	for _, c := range report.Caches {
		held := map[string]int{}
		for _, h := range c.Held {
			held[h.Kind] = h.Objects
		}
		if held["Kyma"] != owners[c.Shard] || held["Manifest"] != owners[c.Shard]*opts.Modules || held["Secret"] < owners[c.Shard] {
			t.Errorf("shard %d's cache holds %v; want its %d Kymas, their %d Manifests and at least their kubeconfig Secrets",
				c.Shard, held, owners[c.Shard], owners[c.Shard]*opts.Modules)
		}
	}
	r := report.Rollout
	if r == nil || r.Phase == nil {
		t.Fatal("the report has no rollout phase")
	}
	if p := r.Phase; !p.Converged || p.KymasDone != shardedKymas || r.Halted != "" {
		t.Errorf("rollout: %d of %d Kymas done (converged %v, halted %q); not done: %v", p.KymasDone, p.KymasTotal, p.Converged, r.Halted, p.NotDone)
	}
	wantWaves := []int{2, 4, 4, 2}
	var sizes []int
	for i, w := range r.Waves {
		sizes = append(sizes, w.Kymas)
		if i > 0 && w.StartSeconds < r.Waves[i-1].ReadySeconds {
			t.Errorf("wave %d admitted at %vs, before wave %d was Ready at %vs", i, w.StartSeconds, i-1, r.Waves[i-1].ReadySeconds)
		}
		if w.IdealSeconds <= 0 {
			t.Errorf("wave %d has no ideal at speed: %+v", i, w)
		}
	}
	if !slices.Equal(sizes, wantWaves) || !slices.Equal(r.PlannedWaves, wantWaves) {
		t.Errorf("waves as run %v, planned %v; want %v", sizes, r.PlannedWaves, wantWaves)
	}
	soaks := float64(len(wantWaves)-1) * rolloutSoak.Seconds()
	if r.Shards != shards || r.SpeedFrom != "install" || r.ManifestsPerSecond <= 0 ||
		r.IdealAtSpeedSeconds <= soaks || r.RatioToIdealAtSpeed <= 0 || r.TotalSeconds < soaks {
		t.Errorf("rollout figures: shards %d, %v Manifests/s from %q, ideal at speed %vs (ratio %v), total %vs; want the install's speed and an ideal above the %vs of soaks",
			r.Shards, r.ManifestsPerSecond, r.SpeedFrom, r.IdealAtSpeedSeconds, r.RatioToIdealAtSpeed, r.TotalSeconds, soaks)
	}
}

// testWriter sends the benchmark's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSmallFleetIsTakenOverFromKLM runs the takeover phase at a small size:
// every Kyma written as the Kyma lifecycle-manager leaves it is Ready under
// this operator, every Manifest recorded its takeover, none of KLM's is
// left, and no module object was recreated or changed its spec or data.
func TestSmallFleetIsTakenOverFromKLM(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const kymas, modules = 4, 3
	opts := fleetbench.DefaultOptions()
	opts.Kymas, opts.Modules, opts.Runtimes = kymas, modules, 2
	opts.Takeover = true
	opts.Rollout = nil
	opts.RawWrites = 0
	opts.Idle = 0
	opts.SampleInterval = time.Second
	opts.Progress = testWriter{t}
	report, err := fleetbench.Run(ctx, opts)
	if err != nil {
		t.Fatalf("the benchmark failed: %v", err)
	}
	p, check := report.Takeover, report.TakeoverCheck
	if report.Install != nil || p == nil || check == nil {
		t.Fatalf("the takeover phase replaces the install: install %v, takeover %v, check %v", report.Install, p, check)
	}
	if !p.Converged || p.KymasDone != kymas {
		t.Errorf("takeover: %d of %d Kymas done (converged %v); not done: %v", p.KymasDone, kymas, p.Converged, p.NotDone)
	}
	if p.BenchWrites != 0 {
		t.Errorf("takeover: the benchmark wrote %d objects during the phase, want none (KLM's fleet is written before it)", p.BenchWrites)
	}
	if check.TakenOver != kymas*modules || check.KLMManifestsLeft != 0 {
		t.Errorf("takeover: %d Manifests recorded a takeover and %d of KLM's are left, want %d and 0", check.TakenOver, check.KLMManifestsLeft, kymas*modules)
	}
	if check.RuntimeKymasLeft != 0 {
		t.Errorf("takeover: %d runtime Kymas still carry KLM's mark or field managers, want none", check.RuntimeKymasLeft)
	}
	if check.ModuleObjects != 2*kymas*modules || check.Recreated != 0 || check.SpecChanged != 0 {
		t.Errorf("takeover: of %d module objects (want %d) %d recreated and %d changed, want none", check.ModuleObjects, 2*kymas*modules, check.Recreated, check.SpecChanged)
	}
	// The bench modules run no workload: their objects' writes are the
	// takeover's metadata moves (field managers, this operator's marks),
	// and none of them changed a generation or data (above).
	if check.ModuleObjectWrites["configmaps"] == 0 || check.ModuleObjectWrites["benchmodules"] == 0 {
		t.Errorf("takeover: module objects' writes %v, want the takeover's metadata writes to both kinds", check.ModuleObjectWrites)
	}
	if check.KymasReadySeconds > p.Seconds {
		t.Errorf("takeover: the last Kyma was Ready after %.1fs, after the phase's end at %.1fs", check.KymasReadySeconds, p.Seconds)
	}
	if p.Runtimes.Writes < float64(p.MinimalRuntimeWrites) || p.OperatorKCPWrites < float64(p.MinimalKCPWrites) {
		t.Errorf("takeover: %v runtime and %v control-plane writes, fewer than the minimal %d and %d", p.Runtimes.Writes, p.OperatorKCPWrites, p.MinimalRuntimeWrites, p.MinimalKCPWrites)
	}
	var out strings.Builder
	report.Print(&out)
	t.Log(out.String())
	if !strings.Contains(out.String(), "takeover: writes to module workloads: 0 (the bench modules run no workload") {
		t.Errorf("the printed report does not say what the takeover left:\n%s", out.String())
	}
}

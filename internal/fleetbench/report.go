package fleetbench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
)

// Report is everything one benchmark run measured. It is written as JSON so
// that runs can be compared over time (SPEC R14); Print renders the same
// figures for people.
type Report struct {
	Scenario Scenario  `json:"scenario"`
	Machine  Machine   `json:"machine"`
	Started  time.Time `json:"started"`
	// SetupSeconds is the time to start the API servers and the registry
	// and publish the modules; not part of any figure.
	SetupSeconds float64    `json:"setupSeconds"`
	Raw          *RawWrites `json:"rawWrites,omitempty"`
	Install      *Phase     `json:"install,omitempty"`
	// Takeover replaces Install under --takeover; TakeoverCheck is what it
	// left (takeover.go).
	Takeover      *Phase         `json:"takeover,omitempty"`
	TakeoverCheck *TakeoverCheck `json:"takeoverCheck,omitempty"`
	Upgrade       *Phase         `json:"upgrade,omitempty"`
	Rollout       *Rollout       `json:"rollout,omitempty"`
	Backups       *Backups       `json:"backups,omitempty"`
	Idle          *Idle          `json:"idle,omitempty"`
	Memory        Memory         `json:"memory"`
	// Caches are what each operator's (each shard's) informers held of
	// Kymas, Manifests and Secrets when the install ended; shard 0's
	// rollout planner holds every Kyma and Manifest in a cache of its own
	// besides (not counted here).
	Caches []ShardCache `json:"caches,omitempty"`
	// Processes are the control-plane binaries, with CPU seconds used per
	// phase and their memory at the end.
	Processes map[string]ProcessFigures `json:"processes,omitempty"`
	Timeline  []Sample                  `json:"timeline,omitempty"`
	// Converged is true when every phase run reached its goal.
	Converged bool `json:"converged"`
	// Error says what stopped the run early, if anything did.
	Error string `json:"error,omitempty"`
}

// Scenario is what was run.
type Scenario struct {
	Kymas               int     `json:"kymas"`
	Modules             int     `json:"modules"`
	Manifests           int     `json:"manifests"`
	Runtimes            int     `json:"runtimes"`
	Shards              int     `json:"shards,omitempty"`
	CatalogSync         bool    `json:"catalogSync"`
	KymaConcurrency     int     `json:"kymaConcurrency"`
	ManifestConcurrency int     `json:"manifestConcurrency"`
	KCPQPS              float32 `json:"kcpQPS"`
	KCPBurst            int     `json:"kcpBurst"`
	RuntimeQPS          float32 `json:"runtimeQPS"`
	RuntimeBurst        int     `json:"runtimeBurst"`
	ReadyInterval       string  `json:"readyInterval"`
	IdleSeconds         float64 `json:"idleSeconds"`
	// APIServerFeatureGates is the --feature-gates every API server ran
	// with; empty: Kubernetes' defaults.
	APIServerFeatureGates string `json:"apiServerFeatureGates,omitempty"`
}

// Machine describes where the run happened; figures from different machines
// are not comparable.
type Machine struct {
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpuModel,omitempty"`
	MemoryBytes int64  `json:"memoryBytes"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"goVersion"`
	// LoadAverage is the 1-minute load average at the start and the end;
	// a high start value means other work shared the machine.
	LoadAverageStart float64 `json:"loadAverageStart"`
	LoadAverageEnd   float64 `json:"loadAverageEnd"`
}

// Phase is the figures of the install or the fleet-wide upgrade.
type Phase struct {
	Name       string  `json:"name"`
	Version    string  `json:"version"`
	Seconds    float64 `json:"seconds"`
	KymasDone  int     `json:"kymasDone"`
	KymasTotal int     `json:"kymasTotal"`
	Converged  bool    `json:"converged"`
	// NotDone lists a few Kymas that had not reached the goal when the
	// phase stopped.
	NotDone []string `json:"notDone,omitempty"`

	// KCP and Runtimes are the requests the control plane's and all
	// runtime API servers counted. KCP includes the benchmark's own writes
	// (BenchWrites); OperatorKCPWrites excludes them.
	KCP               Requests `json:"kcp"`
	Runtimes          Requests `json:"runtimes"`
	BenchWrites       int64    `json:"benchWrites"`
	OperatorKCPWrites float64  `json:"operatorKcpWrites"`
	KCPWritesPerMan   float64  `json:"kcpWritesPerManifest"`
	RuntimeWritesPerM float64  `json:"runtimeWritesPerManifest"`

	// MinimalKCPWrites and MinimalRuntimeWrites are what any design must
	// write (docs/performance.md says why these); Efficiency is
	// (MinimalKCPWrites ÷ raw write rate) ÷ Seconds, and MachineEfficiency
	// the same with the runtime API servers' minimal writes added, as all
	// API servers share the machine's cores.
	MinimalKCPWrites     int     `json:"minimalKcpWrites"`
	MinimalRuntimeWrites int     `json:"minimalRuntimeWrites"`
	Efficiency           float64 `json:"efficiency"`
	MachineEfficiency    float64 `json:"machineEfficiency"`

	OperatorCPUSeconds float64            `json:"operatorCpuSeconds"`
	ProcessCPUSeconds  map[string]float64 `json:"processCpuSeconds,omitempty"`
	KymaReconciles     float64            `json:"kymaReconciles"`
	ManifestReconciles float64            `json:"manifestReconciles"`

	// AverageKymaSeconds is the mean time from the phase's start until a
	// Kyma reached the goal; P50/P95/MaxKymaSeconds are its distribution.
	AverageKymaSeconds float64 `json:"averageKymaSeconds"`
	P50KymaSeconds     float64 `json:"p50KymaSeconds"`
	P95KymaSeconds     float64 `json:"p95KymaSeconds"`
	MaxKymaSeconds     float64 `json:"maxKymaSeconds"`
	// RuntimeMajorIdealSeconds is the average completion time had the same
	// total time been spent finishing Kymas one after another (SPEC R15):
	// total×(N+1)/(2N). RatioToIdeal is AverageKymaSeconds divided by it.
	RuntimeMajorIdealSeconds float64 `json:"runtimeMajorIdealSeconds"`
	RatioToIdeal             float64 `json:"ratioToIdeal"`
	// CompletionCurve is the fraction of Kymas done at each tenth of the
	// phase; runtime-major order makes it a straight line (0.1, 0.2, …),
	// work spread over all Kymas at once bunches it at the end.
	CompletionCurve []float64 `json:"completionCurve,omitempty"`
	// History is what the operation history recorded and cost.
	History History `json:"history"`
	// StaleReadyKymas counts Kymas seen Ready at the new version with a
	// status computed from a Manifest of before the phase (see goal.check).
	StaleReadyKymas int `json:"staleReadyKymas"`
}

// Idle is the steady state after convergence.
type Idle struct {
	Seconds float64 `json:"seconds"`
	// SettleSeconds is how long the operator's queues took to drain after
	// the last phase; the measurement starts after it.
	SettleSeconds      float64  `json:"settleSeconds"`
	OperatorCPUSeconds float64  `json:"operatorCpuSeconds"`
	OperatorCPUShare   float64  `json:"operatorCpuShare"`
	KCP                Requests `json:"kcp"`
	Runtimes           Requests `json:"runtimes"`
	KymaReconciles     float64  `json:"kymaReconciles"`
	ManifestReconciles float64  `json:"manifestReconciles"`
	// ManifestChecks are the periodic checks of Ready Manifests made
	// without a reconcile.
	ManifestChecks    float64            `json:"manifestChecks"`
	ProcessCPUSeconds map[string]float64 `json:"processCpuSeconds,omitempty"`
}

// ShardCache is what one operator's informers held (shard.Held).
type ShardCache struct {
	Shard int             `json:"shard"`
	Held  []shard.Holding `json:"held"`
}

// Memory is the operator's (the benchmark process's) memory.
type Memory struct {
	PeakHeapInuseBytes uint64 `json:"peakHeapInuseBytes"`
	PeakGoSysBytes     uint64 `json:"peakGoSysBytes"`
	MaxRSSBytes        int64  `json:"maxRssBytes"`
	// Manifests is how many Manifests the operator created in the install
	// (its writes to manifests there, one create each; at most N×M), so
	// that a run stopped early still gives a per-Manifest figure.
	// RSSBytesPerManifest and HeapBytesPerManifest divide the maximum RSS
	// and the peak heap in use by it.
	Manifests            int   `json:"manifests"`
	RSSBytesPerManifest  int64 `json:"rssBytesPerManifest,omitempty"`
	HeapBytesPerManifest int64 `json:"heapBytesPerManifest,omitempty"`
}

// perManifest fills the per-Manifest memory figures from the install.
func (m *Memory) perManifest(install *Phase, planned int) {
	if install == nil {
		return
	}
	m.Manifests = min(int(install.KCP.WritesByResource["manifests"]), planned)
	if m.Manifests == 0 {
		return
	}
	m.RSSBytesPerManifest = m.MaxRSSBytes / int64(m.Manifests)
	m.HeapBytesPerManifest = int64(m.PeakHeapInuseBytes) / int64(m.Manifests)
}

// ProcessFigures are one control-plane binary's totals.
type ProcessFigures struct {
	CPUSecondsByPhase map[string]float64 `json:"cpuSecondsByPhase"`
	RSSBytes          int64              `json:"rssBytes"`
	PeakRSSBytes      int64              `json:"peakRssBytes"`
}

// Sample is the fleet at one moment, for the progress of long runs. Counts
// are cumulative from the operator's start; the request counters are not
// read during the idle phase (their parsing would be most of what the
// benchmark process does there), so KCPWrites and RuntimeWrites repeat the
// last value read.
type Sample struct {
	Seconds            float64            `json:"t"`
	Phase              string             `json:"phase"`
	KymasDone          int                `json:"kymasDone"`
	KCPWrites          float64            `json:"kcpWrites"`
	RuntimeWrites      float64            `json:"runtimeWrites"`
	OperatorCPUSeconds float64            `json:"operatorCpuSeconds"`
	HeapInuseBytes     uint64             `json:"heapInuseBytes"`
	OperatorRSSBytes   int64              `json:"operatorRssBytes"`
	ProcessCPUSeconds  map[string]float64 `json:"processCpuSeconds,omitempty"`
	ProcessRSSBytes    map[string]int64   `json:"processRssBytes,omitempty"`
}

// completionStats fills the distribution of per-Kyma completion times and,
// for a phase that converged, the comparison with runtime-major order.
// total is the phase's duration.
func (p *Phase) completionStats(done map[string]time.Duration, total time.Duration) {
	if len(done) == 0 {
		return
	}
	secs := make([]float64, 0, len(done))
	sum := 0.0
	for _, d := range done {
		secs = append(secs, d.Seconds())
		sum += d.Seconds()
	}
	sort.Float64s(secs)
	p.AverageKymaSeconds = sum / float64(len(secs))
	p.P50KymaSeconds = percentile(secs, 0.50)
	p.P95KymaSeconds = percentile(secs, 0.95)
	p.MaxKymaSeconds = secs[len(secs)-1]
	if !p.Converged {
		return // the total is the timeout, not the phase's duration
	}
	p.CompletionCurve = completionCurve(secs, total.Seconds(), 10)
	p.RuntimeMajorIdealSeconds = runtimeMajorIdeal(total, len(secs)).Seconds()
	if p.RuntimeMajorIdealSeconds > 0 {
		p.RatioToIdeal = p.AverageKymaSeconds / p.RuntimeMajorIdealSeconds
	}
}

// runtimeMajorIdeal is the average completion time of n runtimes finished
// one after another at an even pace within total: the k-th completes at
// total×k/n, so the mean is total×(n+1)/(2n). Any interleaving of work
// across runtimes at the same throughput can only make the mean later.
func runtimeMajorIdeal(total time.Duration, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(float64(total) * float64(n+1) / float64(2*n))
}

// completionCurve is, for each of steps equal slices of total, the fraction
// of the sorted completion times at or before the slice's end.
func completionCurve(sorted []float64, total float64, steps int) []float64 {
	if len(sorted) == 0 || total <= 0 {
		return nil
	}
	curve := make([]float64, steps)
	i := 0
	for s := range steps {
		limit := total * float64(s+1) / float64(steps)
		for i < len(sorted) && sorted[i] <= limit {
			i++
		}
		curve[s] = float64(i) / float64(len(sorted))
	}
	// The last Kyma completes at the phase's end by definition.
	curve[steps-1] = 1
	return curve
}

// percentile of sorted values, nearest rank.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// efficiency is how close the run came to the API server's raw write rate:
// the time the minimal writes would take at that rate, over the time taken.
func efficiency(minimalWrites int, rawPerSecond, seconds float64) float64 {
	if rawPerSecond <= 0 || seconds <= 0 {
		return 0
	}
	return float64(minimalWrites) / rawPerSecond / seconds
}

// minimalWrites are the writes any design must make for n Kymas of m
// modules, to the control plane and to the runtimes, per phase. See
// docs/performance.md for why these and not fewer or more.
func minimalWrites(phase string, n, m int) (kcp, runtimes int) {
	// Control plane, both phases: per Manifest its spec (create or update)
	// and one status write; per Kyma one status write.
	kcp = n * (2*m + 1)
	switch phase {
	case phaseTakeover:
		// Per Manifest also KLM's released: deleted and its finalizer
		// removed. Per Kyma the runtime's Kyma; per module object its
		// fields moved and this operator's labels applied.
		kcp += n * m * 2
		runtimes = n * (4*m + 1)
	case phaseInstall:
		// Per Kyma: its namespace, the runtime's Kyma, and each module's
		// ConfigMap and custom resource.
		runtimes = n * (2*m + 2)
	default:
		// The upgrade changes one ConfigMap per module.
		runtimes = n * m
	}
	return kcp, runtimes
}

// Print writes the report as tables for people.
func (r *Report) Print(w io.Writer) {
	s := r.Scenario
	catalog := "off"
	if s.CatalogSync {
		catalog = "on"
	}
	fmt.Fprintf(w, "\nFleet benchmark: %d Kymas × %d modules = %d Manifests on %d runtime API servers; catalog sync %s\n",
		s.Kymas, s.Modules, s.Manifests, s.Runtimes, catalog)
	shards := "one process"
	if s.Shards > 1 {
		shards = fmt.Sprintf("%d shards in this process, shard 0 planning the rollouts", s.Shards)
	}
	fmt.Fprintf(w, "operator: %s; Kyma concurrency %d, Manifest concurrency %d, KCP client QPS %s, runtime client QPS %s, Ready interval %s\n",
		shards, s.KymaConcurrency, s.ManifestConcurrency, qps(s.KCPQPS, s.KCPBurst), qps(s.RuntimeQPS, s.RuntimeBurst), s.ReadyInterval)
	m := r.Machine
	fmt.Fprintf(w, "machine: %d CPUs (%s), %s RAM, %s, %s; load average %.1f at start, %.1f at end\n",
		m.CPUs, m.CPUModel, bytesIEC(m.MemoryBytes), m.Kernel, m.GoVersion, m.LoadAverageStart, m.LoadAverageEnd)
	if r.Raw != nil {
		fmt.Fprintf(w, "raw write rate of the KCP API server: %.0f writes/s (%d ConfigMap creates, %d workers, %.1fs)\n",
			r.Raw.PerSecond, r.Raw.Writes, r.Raw.Concurrency, r.Raw.Seconds)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nphase\ttime\tKymas done\tKCP writes (operator)\t/Manifest\truntime writes\t/Manifest\tdry-runs KCP+rt\tminimal KCP\tefficiency\tmachine eff.\toperator CPU s\tKyma avg / p95\truntime-major ideal\tratio\t")
	for _, p := range r.phases() {
		efficiency, machine, ideal, ratio := "-", "-", "-", "-"
		if p.Efficiency > 0 {
			efficiency, machine = fmt.Sprintf("%.1f%%", 100*p.Efficiency), fmt.Sprintf("%.1f%%", 100*p.MachineEfficiency)
		}
		if p.RuntimeMajorIdealSeconds > 0 {
			ideal, ratio = fmt.Sprintf("%.1fs", p.RuntimeMajorIdealSeconds), fmt.Sprintf("%.2f", p.RatioToIdeal)
		}
		fmt.Fprintf(tw, "%s\t%.1fs\t%d/%d\t%.0f\t%.2f\t%.0f\t%.2f\t%.0f\t%d\t%s\t%s\t%.1f\t%.1fs / %.1fs\t%s\t%s\t\n",
			p.Name, p.Seconds, p.KymasDone, p.KymasTotal, p.OperatorKCPWrites, p.KCPWritesPerMan,
			p.Runtimes.Writes, p.RuntimeWritesPerM, p.KCP.DryRuns+p.Runtimes.DryRuns, p.MinimalKCPWrites,
			efficiency, machine, p.OperatorCPUSeconds,
			p.AverageKymaSeconds, p.P95KymaSeconds, ideal, ratio)
	}
	_ = tw.Flush()
	for _, p := range r.phases() {
		if len(p.CompletionCurve) > 0 {
			parts := make([]string, 0, len(p.CompletionCurve))
			for _, f := range p.CompletionCurve {
				parts = append(parts, fmt.Sprintf("%.0f%%", 100*f))
			}
			hint := " (runtime-major: 10%, 20%, … 100%)"
			if p.Name == phaseRollout {
				hint = " (in waves: steps)"
			}
			fmt.Fprintf(w, "%s: Kymas done at each tenth of the phase: %s%s\n", p.Name, strings.Join(parts, " "), hint)
		}
	}
	for _, p := range r.phases() {
		fmt.Fprintf(w, "%s: operation history recorded %d operations to %s; Manifest status writes %.2f per Manifest moved (one is the write that reports the result)\n",
			p.Name, p.History.Operations, p.Version, p.History.StatusWritesPerManifest)
	}
	r.TakeoverCheck.print(w, r.Takeover, r.Scenario.Modules)
	r.Rollout.print(w)
	r.Backups.print(w)
	if r.Upgrade != nil && r.Upgrade.StaleReadyKymas > 0 {
		fmt.Fprintf(w, "upgrade: %d Kymas were seen Ready at %s with a status computed from their old Manifests (not counted as done)\n",
			r.Upgrade.StaleReadyKymas, r.Upgrade.Version)
	}
	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "idle %.0fs after convergence (queues drained %.1fs after it): operator CPU %.2fs (%.2f%% of one core), %.0f Kyma and %.0f Manifest reconciles, %.0f Manifest checks, writes KCP %.0f / runtimes %.0f, dry-runs %.0f\n",
			i.Seconds, i.SettleSeconds, i.OperatorCPUSeconds, 100*i.OperatorCPUShare, i.KymaReconciles, i.ManifestReconciles, i.ManifestChecks,
			i.KCP.Writes, i.Runtimes.Writes, i.KCP.DryRuns+i.Runtimes.DryRuns)
		fmt.Fprintf(w, "idle reads by resource: KCP %s; runtimes %s\n", topResources(i.KCP.ReadsByResource, 6), topResources(i.Runtimes.ReadsByResource, 6))
	}
	fmt.Fprintf(w, "operator memory: peak Go heap in use %s, peak Go runtime %s, max RSS %s",
		bytesIEC(int64(r.Memory.PeakHeapInuseBytes)), bytesIEC(int64(r.Memory.PeakGoSysBytes)), bytesIEC(r.Memory.MaxRSSBytes))
	if m := r.Memory; m.Manifests > 0 {
		fmt.Fprintf(w, "; per Manifest (%d created): RSS %s, heap %s", m.Manifests, bytesIEC(m.RSSBytesPerManifest), bytesIEC(m.HeapBytesPerManifest))
	}
	fmt.Fprintln(w)
	for _, c := range r.Caches {
		fmt.Fprintf(w, "cache of shard %d after the install:", c.Shard)
		for _, h := range c.Held {
			fmt.Fprintf(w, " %d %ss (%s as JSON)", h.Objects, h.Kind, bytesIEC(h.Bytes))
		}
		fmt.Fprintln(w)
	}

	if len(r.Processes) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\nprocess\tCPU s install/takeover\tupgrade\tidle\trollout\tRSS end\tpeak RSS\t")
		for _, name := range slices.Sorted(maps.Keys(r.Processes)) {
			p := r.Processes[name]
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", name,
				p.CPUSecondsByPhase[phaseInstall]+p.CPUSecondsByPhase[phaseTakeover], p.CPUSecondsByPhase[phaseUpgrade], p.CPUSecondsByPhase[phaseIdle],
				p.CPUSecondsByPhase[phaseRollout], bytesIEC(p.RSSBytes), bytesIEC(p.PeakRSSBytes))
		}
		_ = tw.Flush()
	}
	for _, p := range r.phases() {
		fmt.Fprintf(w, "%s writes by resource: KCP %s; runtimes %s\n", p.Name, topResources(p.KCP.WritesByResource, 8), topResources(p.Runtimes.WritesByResource, 8))
		fmt.Fprintf(w, "%s reads by resource: KCP %s; runtimes %s\n", p.Name, topResources(p.KCP.ReadsByResource, 6), topResources(p.Runtimes.ReadsByResource, 6))
		if len(p.NotDone) > 0 {
			fmt.Fprintf(w, "%s: not done, e.g. %s\n", p.Name, strings.Join(p.NotDone, "; "))
		}
	}
	if r.Error != "" {
		fmt.Fprintf(w, "stopped early: %s\n", r.Error)
	}
}

// phases are the phases that ran, in order.
func (r *Report) phases() []*Phase {
	var out []*Phase
	for _, p := range []*Phase{r.Install, r.Takeover, r.Upgrade} {
		if p != nil {
			out = append(out, p)
		}
	}
	if r.Rollout != nil && r.Rollout.Phase != nil {
		out = append(out, r.Rollout.Phase)
	}
	return out
}

func topResources(byResource map[string]float64, n int) string {
	keys := slices.SortedFunc(maps.Keys(byResource), func(a, b string) int {
		return cmp.Or(cmp.Compare(byResource[b], byResource[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, n)
	for i, k := range keys {
		if i == n {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", k, byResource[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func qps(q float32, burst int) string {
	if q < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g (burst %d)", q, burst)
}

func bytesIEC(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

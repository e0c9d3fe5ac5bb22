// Command fleet-bench runs the scale benchmark (SPEC R14): a control plane,
// runtime API servers and the operator in-process, N Kymas × M modules. It
// prints its figures and writes them as JSON. Everything is in
// internal/fleetbench; docs/performance.md explains the figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/fleetbench"
)

func main() {
	// The operator in-process renders Helm charts in child processes of
	// this binary; in one of them, this renders and exits.
	render.ServeIfRenderProcess()
	os.Exit(run())
}

func run() int {
	opts := fleetbench.DefaultOptions()
	var (
		timeout    time.Duration
		out        string
		operatorLg bool
		cpuProfile string
		maxRSSGiB  = defaultMaxRSSGiB()
		serverGiB  float64
		kcpQPS     = float64(opts.KCPQPS)
		runtimeQPS = float64(opts.RuntimeQPS)
	)
	flag.IntVar(&opts.Kymas, "kymas", opts.Kymas, "Kymas (runtimes) to install.")
	flag.IntVar(&opts.Modules, "modules", opts.Modules, "Modules per Kyma.")
	flag.IntVar(&opts.Runtimes, "runtimes", opts.Runtimes, "Runtime API servers the Kymas share, round-robin; each Kyma uses a namespace of its own (spec.syncNamespace).")
	flag.IntVar(&opts.Shards, "shards", opts.Shards, "Run the operator as this many shards (--shards, --shard-id), each a whole operator in this process, shard 0 planning the rollouts; 0 or 1 runs one operator.")
	flag.BoolVar(&opts.CatalogSync, "catalog-sync", opts.CatalogSync, "Copy the module catalog into every runtime (the product's default); each Kyma gets its own copy in its namespace.")
	flag.BoolVar(&opts.Upgrade, "upgrade", opts.Upgrade, "Run the fleet-wide upgrade (channel moved to 2.0.0 for every module) after the install.")
	flag.BoolVar(&opts.Takeover, "takeover", opts.Takeover, "Instead of the install, write the fleet as the Kyma lifecycle-manager leaves it (its Manifests, finalizers, field managers and marks) and time the operator taking it over (--klm-takeover=all); the report checks that no module object was recreated or changed.")
	rollout := opts.Rollout
	var (
		withRollout        = true
		rolloutMaxInFlight = rollout.MaxInFlight.String()
	)
	flag.BoolVar(&withRollout, "rollout", withRollout, "Run the rollout phase last: the first module's channel moves to 3.0.0 under a ModuleRollout, timed against the ideal for its waves.")
	flag.IntVar(&rollout.Canary, "rollout-canary", rollout.Canary, "The rollout's canary wave: how many Kymas (0: none).")
	flag.StringVar(&rolloutMaxInFlight, "rollout-max-in-flight", rolloutMaxInFlight, "The rollout's later waves: a count of Kymas, or a percentage of the fleet (\"20%\").")
	flag.DurationVar(&rollout.Soak, "rollout-soak", rollout.Soak, "How long each wave of the rollout soaks before the next.")
	backupOpts := fleetbench.DefaultBackupOptions()
	flag.StringVar(&backupOpts.Schedule, "backup-schedule", "", "Run the backup phase last: every Kyma backed up on this cron schedule (e.g. \"@every 5m\", spread over the period by the jitter), one round measured in real time. Empty skips it.")
	flag.IntVar(&backupOpts.MaxConcurrency, "backup-max-concurrency", 0, "The operator's --backup-max-concurrency in the backup phase; 0 keeps its default.")
	flag.DurationVar(&opts.Idle, "idle", opts.Idle, "How long to measure the idle fleet after convergence; 0 skips it.")
	flag.DurationVar(&opts.ReadyInterval, "ready-interval", opts.ReadyInterval, "The operator's Ready requeue interval (its periodic drift check); 0 keeps the operator's default (5m).")
	flag.IntVar(&opts.KymaConcurrency, "kyma-concurrency", opts.KymaConcurrency, "The operator's concurrent Kyma reconciles.")
	flag.IntVar(&opts.ManifestConcurrency, "manifest-concurrency", opts.ManifestConcurrency, "The operator's concurrent Manifest reconciles.")
	flag.Float64Var(&kcpQPS, "kcp-qps", kcpQPS, "QPS of the operator's control-plane client; negative disables client-side limiting, as in production.")
	flag.IntVar(&opts.KCPBurst, "kcp-burst", opts.KCPBurst, "Burst of the operator's control-plane client.")
	flag.Float64Var(&runtimeQPS, "runtime-qps", runtimeQPS, "QPS of each runtime client of the operator.")
	flag.IntVar(&opts.RuntimeBurst, "runtime-burst", opts.RuntimeBurst, "Burst of each runtime client of the operator.")
	flag.IntVar(&opts.CreateConcurrency, "create-concurrency", opts.CreateConcurrency, "Kymas the benchmark registers at once.")
	flag.IntVar(&opts.RawWrites, "raw-writes", opts.RawWrites, "Writes of the raw write-rate loop against the control plane; 0 skips it.")
	flag.IntVar(&opts.RawConcurrency, "raw-concurrency", opts.RawConcurrency, "Workers of the raw write-rate loop.")
	flag.DurationVar(&opts.SampleInterval, "sample", opts.SampleInterval, "How often progress is printed and the timeline sampled.")
	flag.DurationVar(&timeout, "timeout", 30*time.Minute, "Stop the run after this long and report how far it got.")
	flag.StringVar(&out, "out", filepath.Join(os.TempDir(), "fleet-bench", "bench-results.json"), "Where to write the JSON report.")
	flag.BoolVar(&operatorLg, "operator-log", false, "Show the operator's logs on stderr.")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "Write a CPU profile of the whole run (the operator and the benchmark's client) to this file.")
	flag.Float64Var(&maxRSSGiB, "max-rss-gib", maxRSSGiB, "Stop the run when the operator and the API servers hold more memory than this (GiB); 0 disables. The default is 60% of the machine's memory.")
	flag.Float64Var(&serverGiB, "server-memory-limit-gib", 0, "GOMEMLIMIT (GiB) of each API server and etcd the benchmark starts: a soft limit that makes their garbage collector work harder near it, so that a 10,000x20 control plane fits the machine; 0 sets none.")
	flag.StringVar(&opts.IdleCPUProfile, "idle-cpuprofile", "", "Write a CPU profile of the idle measurement only to this file (not with --cpuprofile).")
	flag.StringVar(&opts.ServerProfiles, "server-profiles", "", "Write CPU profiles of the control-plane API server and the first runtime API server, taken during each phase, into this directory (<phase>-kcp.pprof, <phase>-runtime.pprof).")
	flag.DurationVar(&opts.ServerProfileDelay, "server-profile-delay", 30*time.Second, "With --server-profiles: how far into each phase the profiles start.")
	flag.IntVar(&opts.ServerProfileSeconds, "server-profile-seconds", 30, "With --server-profiles: how long each profile lasts.")
	flag.StringVar(&opts.APIServerFeatureGates, "apiserver-feature-gates", "", "The --feature-gates of every API server the benchmark starts (e.g. \"DetectCacheInconsistency=false\", whose periodic re-read of every object grows with the fleet, not with the operator's requests); empty keeps Kubernetes' defaults.")
	flag.StringVar(&opts.HeapProfile, "heapprofile", "", "Write a heap profile, taken when the install ends, to this file.")
	reaction := fleetbench.DefaultReactionOptions()
	reaction.Repetitions = 0
	flag.IntVar(&reaction.Repetitions, "reaction", 0, "Run the reaction benchmark instead: this many modules made ready one after another in one runtime, each timed to its Kyma showing Ready (the fleet flags are ignored).")
	flag.IntVar(&reaction.Starts, "reaction-starts", reaction.Starts, "With --reaction: operator binary starts, each timed to a Kyma's first status; 0 skips them.")
	lone := fleetbench.DefaultLoneOptions()
	lone.Modules = 0
	flag.IntVar(&lone.Modules, "lone", 0, "Run the lone-runtime benchmark instead: one runtime whose Kyma lists this many real-size modules from the start, timed from the operator's start to Ready, from the last module's CR Ready to the Kyma's, and its deletion (the fleet flags are ignored).")
	flag.IntVar(&lone.Repetitions, "lone-repetitions", lone.Repetitions, "With --lone: how many times the run is made, each with a Kyma, modules and an operator start of its own.")
	flag.DurationVar(&lone.MaxHold, "lone-hold", lone.MaxHold, "With --lone: the longest the stand-in module operator waits, at random, before making a module ready.")
	flag.IntVar(&lone.MaxWorkersPerRuntime, "lone-max-workers-per-runtime", lone.MaxWorkersPerRuntime, "With --lone: the operator's --max-workers-per-runtime; negative keeps its default.")
	flag.DurationVar(&lone.ProgressInterval, "lone-kyma-progress-interval", lone.ProgressInterval, "With --lone: the operator's --kyma-progress-interval; negative keeps its default.")
	flag.Func("lone-runtime-qps", "With --lone: the operator's --runtime-qps; unset keeps its default.", func(v string) error {
		f, err := strconv.ParseFloat(v, 32)
		lone.RuntimeQPS = float32(f)
		return err
	})
	flag.IntVar(&lone.RuntimeBurst, "lone-runtime-burst", 0, "With --lone: the operator's --runtime-burst; 0 keeps its default.")
	flag.DurationVar(&lone.RequeueProcessing, "lone-requeue-processing", lone.RequeueProcessing, "With --lone: the operator's --requeue-processing; negative keeps its default.")
	flag.Parse()
	rollout.MaxInFlight = intstr.Parse(rolloutMaxInFlight)
	if !withRollout {
		opts.Rollout = nil
	}
	if backupOpts.Schedule != "" {
		opts.Backup = backupOpts
	}
	opts.KCPQPS = float32(kcpQPS)
	opts.RuntimeQPS = float32(runtimeQPS)
	opts.Progress = os.Stderr
	opts.MaxRSSBytes = int64(maxRSSGiB * (1 << 30))
	// GOMEMLIMIT is for the operator (this process; the Go runtime read it
	// at start). The API servers and etcds are children and would inherit
	// it: a kube-apiserver holding a large fleet then spends its CPU in the
	// garbage collector, which the first 10,000×20 run with it measured.
	// Theirs is --server-memory-limit-gib, read when they start.
	if limit, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		fmt.Fprintf(os.Stderr, "GOMEMLIMIT=%s applies to the operator only\n", limit)
		_ = os.Unsetenv("GOMEMLIMIT")
	}
	if serverGiB > 0 {
		serverLimit := fmt.Sprintf("%dMiB", int64(serverGiB*1024))
		fmt.Fprintf(os.Stderr, "GOMEMLIMIT=%s for each API server and etcd\n", serverLimit)
		_ = os.Setenv("GOMEMLIMIT", serverLimit)
	}

	if operatorLg {
		ctrl.SetLogger(zap.New())
	} else {
		ctrl.SetLogger(logr.Discard())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if lone.Modules > 0 {
		return runLone(ctx, lone, out)
	}
	if reaction.Repetitions > 0 {
		return runReaction(ctx, reaction, out)
	}
	if cpuProfile != "" && opts.IdleCPUProfile != "" {
		fmt.Fprintln(os.Stderr, "fleet-bench: --cpuprofile and --idle-cpuprofile cannot be combined: Go keeps one CPU profile at a time")
		return 2
	}
	if cpuProfile != "" {
		stopProfile, err := fleetbench.StartCPUProfile(cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet-bench:", err)
			return 1
		}
		defer stopProfile()
	}
	report, runErr := fleetbench.Run(ctx, opts)
	if report == nil {
		fmt.Fprintln(os.Stderr, "fleet-bench:", runErr)
		return 1
	}
	report.Print(os.Stdout)
	if err := writeJSON(out, report); err != nil {
		fmt.Fprintln(os.Stderr, "fleet-bench:", err)
		return 1
	}
	fmt.Printf("\nJSON report: %s\n", out)
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "fleet-bench:", runErr)
		return 1
	}
	return 0
}

// defaultMaxRSSGiB is 60% of the machine's memory: enough for the largest
// fleet the machine can hold, while the rest of the machine keeps working.
func defaultMaxRSSGiB() float64 {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0
	}
	total := float64(info.Totalram) * float64(info.Unit)
	return math.Round(0.6*total/(1<<30)*10) / 10
}

func writeJSON(path string, report any) error {
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// runReaction runs the reaction benchmark and prints its figures.
func runReaction(ctx context.Context, opts fleetbench.ReactionOptions, out string) int {
	opts.Progress = os.Stderr
	report, err := fleetbench.RunReaction(ctx, opts)
	return printReport(report, report != nil, err, out)
}

// runLone runs the lone-runtime benchmark and prints its figures.
func runLone(ctx context.Context, opts fleetbench.LoneOptions, out string) int {
	opts.Progress = os.Stderr
	report, err := fleetbench.RunLone(ctx, opts)
	return printReport(report, report != nil, err, out)
}

// printReport prints a single-runtime benchmark's report, as far as it got
// (got says there is one), writes it as JSON to out, and returns the exit
// code.
func printReport(report interface{ Print(io.Writer) }, got bool, err error, out string) int {
	if got {
		report.Print(os.Stdout)
		if werr := writeJSON(out, report); werr != nil {
			fmt.Fprintln(os.Stderr, "fleet-bench:", werr)
			return 1
		}
		fmt.Printf("\nJSON report: %s\n", out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet-bench:", err)
		return 1
	}
	return 0
}

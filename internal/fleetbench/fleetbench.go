// Package fleetbench is the scale benchmark of SPEC R14: one control plane
// and a few runtime API servers, N Kymas × M modules, the operator
// in-process with its production settings. It measures the time until every
// Kyma is Ready, the API writes that took (read from each API server's own
// request counters), the operator's CPU and memory, the control-plane API
// server's raw write rate in the same run and the efficiency derived from
// it, a fleet-wide upgrade against runtime-major ideal ordering (SPEC R15),
// and the CPU an idle fleet costs.
//
// Many Kymas share each runtime API server; each Kyma's namespaced objects
// go to a namespace of its own through spec.syncNamespace (SPEC R19). The
// module content is one ConfigMap and one custom resource, so that the
// control plane, not payload size, is what is measured. docs/performance.md
// explains the figures and holds the latest results.
package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// Phase names, as used in the report.
const (
	phaseSetup   = "setup"
	phaseRaw     = "raw"
	phaseInstall = "install"
	phaseUpgrade = "upgrade"
	phaseIdle    = "idle"
	phaseRollout = "rollout"
)

// namespace holds Kymas, Secrets and the catalog in the control plane.
const namespace = "kcp-system"

// Options configure a run. DefaultOptions are a small fleet that runs in a
// few minutes; the operator settings default to the operator's own.
type Options struct {
	Kymas    int
	Modules  int
	Runtimes int
	// Shards, above 1, runs the operator as that many shards (--shards,
	// --shard-id), each a whole operator of its own in this process, with
	// shard 0 planning the rollouts for all; 0 or 1 runs one operator.
	Shards int
	// CatalogSync copies the catalog into every runtime as the product does
	// by default. Off by default here: with one sync namespace per Kyma
	// every Kyma gets its own copy, which multiplies runtime writes.
	CatalogSync bool
	// Upgrade runs the fleet-wide upgrade after the install.
	Upgrade bool
	// Takeover replaces the install: the fleet is written as the Kyma
	// lifecycle-manager leaves it, and the operator takes it over
	// (takeover.go).
	Takeover bool
	// Rollout, when set, runs a last phase: one module's channel moves to a
	// new version under a ModuleRollout with this policy.
	Rollout *RolloutOptions
	// Backup, when set, runs the backup phase last: every Kyma is put on
	// a backup schedule and one round of it is measured.
	Backup *BackupOptions
	// Idle is how long the steady state after convergence is measured;
	// zero skips it.
	Idle time.Duration
	// ReadyInterval is the operator's Ready requeue interval (its drift
	// check); zero keeps the operator's default. A short one lets --idle
	// cover whole intervals cheaply.
	ReadyInterval time.Duration

	KymaConcurrency     int
	ManifestConcurrency int
	// KCPQPS and KCPBurst limit the operator's control-plane client; a
	// negative QPS disables the limiter, as in production.
	KCPQPS   float32
	KCPBurst int
	// RuntimeQPS and RuntimeBurst limit each runtime client.
	RuntimeQPS   float32
	RuntimeBurst int

	// CreateConcurrency is how many Kymas the benchmark registers at once.
	CreateConcurrency int
	// RawWrites and RawConcurrency shape the raw write-rate loop; zero
	// RawWrites skips it.
	RawWrites      int
	RawConcurrency int

	// SampleInterval is how often progress is printed and the timeline
	// sampled.
	SampleInterval time.Duration
	// Progress receives a line per sample; nil discards them.
	Progress io.Writer
	// MaxRSSBytes stops the run when this process and the API servers
	// together hold more resident memory; the run also stops when the
	// machine has less than minAvailableBytes left. Both protect a shared
	// machine from the out-of-memory killer. Zero: no cap of its own.
	MaxRSSBytes int64
	// HeapProfile, when set, receives a heap profile of this process (the
	// operator, mostly) taken when the install ends, converged or not: the
	// operator's memory is largest then.
	HeapProfile string
	// IdleCPUProfile, when set, receives a CPU profile of this process taken
	// over the idle measurement only. It cannot be combined with a profile
	// of the whole run (Go keeps one CPU profile at a time).
	IdleCPUProfile string
	// ServerProfiles, when set, is a directory that receives CPU profiles
	// of the control-plane API server and of the first runtime API server,
	// taken during each phase (serverprofile.go).
	ServerProfiles string
	// ServerProfileDelay is how far into a phase they start; they last
	// ServerProfileSeconds.
	ServerProfileDelay   time.Duration
	ServerProfileSeconds int
	// APIServerFeatureGates, when set, is the --feature-gates of every API
	// server the benchmark starts, the control plane's and the runtimes'.
	// Their cache consistency check (DetectCacheInconsistency) re-reads
	// every object from etcd at intervals, a cost that grows with the fleet
	// and not with the operator's requests; turning it off measures what
	// the operator's requests cost alone.
	APIServerFeatureGates string
}

// DefaultOptions are 50 Kymas × 5 modules on 2 runtime API servers, with
// the operator's defaults.
func DefaultOptions() Options {
	op := operator.DefaultOptions()
	return Options{
		Kymas:               50,
		Modules:             5,
		Runtimes:            2,
		Upgrade:             true,
		Rollout:             DefaultRolloutOptions(),
		Idle:                2 * time.Minute,
		KymaConcurrency:     op.KymaConcurrency,
		ManifestConcurrency: op.ManifestConcurrency,
		KCPQPS:              -1,
		RuntimeQPS:          op.RuntimeQPS,
		RuntimeBurst:        op.RuntimeBurst,
		CreateConcurrency:   16,
		RawWrites:           2000,
		RawConcurrency:      16,
		SampleInterval:      10 * time.Second,
	}
}

func (o Options) validate() error {
	switch {
	case o.Kymas < 1:
		return errors.New("at least one Kyma is needed")
	case o.Modules < 1 || o.Modules > maxModules:
		return fmt.Errorf("modules must be between 1 and %d", maxModules)
	case o.Runtimes < 1:
		return errors.New("at least one runtime API server is needed")
	case o.Shards < 0:
		return errors.New("shards must not be negative")
	case o.KymaConcurrency < 1 || o.ManifestConcurrency < 1 || o.CreateConcurrency < 1 || o.RawConcurrency < 1:
		return errors.New("concurrency settings must be at least 1")
	case o.RawWrites < 0 || o.Idle < 0 || o.SampleInterval <= 0:
		return errors.New("raw writes and idle must not be negative, the sample interval must be positive")
	case o.Rollout != nil:
		return o.Rollout.validate(o.Kymas)
	}
	return nil
}

// Run runs the benchmark and returns its report. When ctx ends before the
// fleet converged, the report says how far it got and an error says why;
// every process the run started is stopped before Run returns.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	b := &bench{opts: opts, modules: ModuleNames(opts.Modules), tracker: newTracker(opts.Kymas)}
	b.report = &Report{
		Scenario: Scenario{
			Kymas: opts.Kymas, Modules: opts.Modules, Manifests: opts.Kymas * opts.Modules, Runtimes: opts.Runtimes, Shards: opts.Shards,
			CatalogSync: opts.CatalogSync, KymaConcurrency: opts.KymaConcurrency, ManifestConcurrency: opts.ManifestConcurrency,
			KCPQPS: opts.KCPQPS, KCPBurst: opts.KCPBurst, RuntimeQPS: opts.RuntimeQPS, RuntimeBurst: opts.RuntimeBurst,
			ReadyInterval: readyInterval(opts.ReadyInterval).String(), IdleSeconds: opts.Idle.Seconds(),
			APIServerFeatureGates: opts.APIServerFeatureGates,
		},
		Machine: machineInfo(),
		Started: time.Now(),
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.stopRun = cancel
	err := b.run(ctx)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(err, cause) {
		// Say why the run was stopped, not only that it was.
		err = fmt.Errorf("%w: %w", cause, err)
	}
	b.close()
	b.finish(err)
	return b.report, err
}

// bench is one run's state.
type bench struct {
	opts    Options
	modules []string
	report  *Report
	tracker *tracker

	tmpDir   string
	kcp      *testcluster.ControlPlane
	runtimes []*testcluster.ControlPlane
	registry *testregistry.Registry
	client   client.Client

	// registryProxy counts the backups' registry traffic; backupSchedules
	// is the backup phase's schedule.
	registryProxy   *countingProxy
	backupSchedules *backup.Schedules

	kcpCounter      *requestCounter
	runtimeCounters []*requestCounter
	children        []childProcess
	benchWrites     atomic.Int64
	// kymasReady is when, in the takeover phase, the last Kyma was Ready.
	kymasReady time.Duration
	mem        memSampler

	// stop ends the samplers, the Kyma watch and the operator; stopped
	// receives the operator's end.
	// stopRun ends the run early with a cause (the memory guard).
	stopRun        context.CancelCauseFunc
	stopBackground context.CancelFunc
	background     sync.WaitGroup
	stopOperator   context.CancelFunc
	operatorDone   chan error
	// operators is how many operators (shards) were started.
	operators int
	// caches are the operators' caches, by shard, to tell what each holds.
	caches []cache.Cache

	mu          sync.Mutex
	phase       string
	phaseProcs  map[string]map[string]float64 // phase → process → CPU seconds
	lastProcs   map[string]ProcessSample
	timelineRef snapshot
}

func (b *bench) run(ctx context.Context) error {
	start := time.Now()
	b.setPhase(phaseSetup)
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stopBackground = stop
	b.background.Go(func() { b.mem.run(bg, time.Second) })
	b.background.Go(func() { b.guardMemory(bg) })

	if err := b.setup(ctx); err != nil {
		return err
	}
	b.report.SetupSeconds = time.Since(start).Seconds()
	fmt.Fprintf(b.opts.Progress, "setup: control plane, %d runtime API servers, registry and %d modules ready in %.1fs\n",
		b.opts.Runtimes, b.opts.Modules, b.report.SetupSeconds)

	if b.opts.RawWrites > 0 {
		if err := b.measureRawWrites(ctx); err != nil {
			return err
		}
	}
	kubeconfigs := make([][]byte, 0, len(b.runtimes))
	for _, rt := range b.runtimes {
		kubeconfigs = append(kubeconfigs, rt.Kubeconfig())
	}
	var klmObjects map[string]moduleObjectState
	var klmWrites int64
	var klmWrite time.Duration
	if b.opts.Takeover {
		started := time.Now()
		var err error
		if klmObjects, klmWrites, err = b.writeKLMFleet(ctx, kubeconfigs); err != nil {
			return err
		}
		klmWrite = time.Since(started)
	}
	if err := watchKymas(bg, b.kcp.Config(), namespace, b.tracker); err != nil {
		return err
	}
	// Under --takeover the operator's start is the takeover phase's load:
	// it acts on KLM's fleet from its first reconcile.
	if !b.opts.Takeover {
		if err := b.startOperator(ctx); err != nil {
			return err
		}
	}
	ref, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	b.timelineRef = ref
	b.background.Go(func() { b.sampleTimeline(bg) })

	if b.opts.Takeover {
		// The phase's clock starts as the operator starts on KLM's fleet
		// (its caches' sync included); its load is that start.
		b.report.Takeover, err = b.runPhase(ctx, phaseTakeover, goal{version: installVersion, modules: b.opts.Modules}, false, b.startOperator)
		if err == nil {
			b.report.TakeoverCheck, err = b.checkTakeover(ctx, b.report.Takeover, klmObjects, klmWrites, klmWrite)
		}
	} else {
		b.report.Install, err = b.runPhase(ctx, phaseInstall, goal{version: installVersion, modules: b.opts.Modules}, false, func(ctx context.Context) error {
			return createKymas(ctx, b.client, namespace, b.opts.Kymas, kubeconfigs, b.modules, b.opts.CreateConcurrency, &b.benchWrites)
		})
	}
	if profErr := b.writeHeapProfile(); profErr != nil || err != nil {
		return errors.Join(err, profErr)
	}
	if b.report.Caches, err = b.heldByShard(ctx); err != nil {
		return err
	}
	// Idle comes before the upgrade: the installed fleet is as steady as an
	// upgraded one, and a large run whose upgrade outlasts --timeout still
	// reports its idle cost, with the upgrade's progress when it was cut.
	if b.opts.Idle > 0 {
		b.report.Idle, err = b.measureIdle(ctx)
		if err != nil {
			return err
		}
	}
	if b.opts.Upgrade {
		b.report.Upgrade, err = b.runPhase(ctx, phaseUpgrade, goal{version: upgradeVersion, modules: b.opts.Modules}, true, func(ctx context.Context) error {
			return moveChannel(ctx, b.client, namespace, b.modules, upgradeVersion, &b.benchWrites)
		})
		if err != nil {
			return err
		}
	}
	if b.opts.Rollout != nil {
		if b.report.Rollout, err = b.runRollout(ctx, bg); err != nil {
			return err
		}
	}
	if b.opts.Backup != nil {
		if b.report.Backups, err = b.runBackups(ctx); err != nil {
			return err
		}
	}
	return nil
}

// writeHeapProfile writes opts.HeapProfile, if set.
func (b *bench) writeHeapProfile() error {
	if b.opts.HeapProfile == "" {
		return nil
	}
	f, err := os.Create(b.opts.HeapProfile)
	if err != nil {
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	return nil
}

// minAvailableBytes is the memory the machine must keep available for
// everything else running on it.
const minAvailableBytes = 2 << 30

// guardMemory stops the run when it uses more memory than opts.MaxRSSBytes
// or leaves the machine with less than minAvailableBytes; the report then
// says how far the fleet got. It samples every two seconds: memory grows
// by at most tens of MiB in that time even at the largest sizes.
func (b *bench) guardMemory(ctx context.Context) {
	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		used := selfRSS()
		for _, p := range sampleProcesses(b.childList()) {
			used += p.RSSBytes
		}
		available := availableMemory()
		switch {
		case b.opts.MaxRSSBytes > 0 && used > b.opts.MaxRSSBytes:
			b.stopRun(fmt.Errorf("memory cap reached: the operator and the API servers hold %s, more than the cap of %s",
				bytesIEC(used), bytesIEC(b.opts.MaxRSSBytes)))
			return
		case available > 0 && available < minAvailableBytes:
			b.stopRun(fmt.Errorf("the machine has only %s of memory available (the benchmark holds %s); stopped to protect everything else on it",
				bytesIEC(available), bytesIEC(used)))
			return
		}
	}
}

func (b *bench) childList() []childProcess {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.children
}

// setup starts the API servers and the registry and publishes the modules.
func (b *bench) setup(ctx context.Context) error {
	var err error
	if b.tmpDir, err = os.MkdirTemp("", "fleetbench-"); err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	crd, err := writeBenchCRD(b.tmpDir)
	if err != nil {
		return err
	}
	b.runtimes = make([]*testcluster.ControlPlane, b.opts.Runtimes)
	var serverArgs []string
	if b.opts.APIServerFeatureGates != "" {
		serverArgs = []string{"--feature-gates=" + b.opts.APIServerFeatureGates}
	}
	g, gctx := errgroup.WithContext(ctx)
	// Two at a time: starting many API servers at once on two cores makes
	// each of them slow to become ready.
	g.SetLimit(2)
	g.Go(func() error {
		var err error
		b.kcp, err = testcluster.StartControlPlane(gctx, testcluster.ControlPlaneOptions{APIServerArgs: serverArgs})
		return err
	})
	for i := range b.runtimes {
		g.Go(func() error {
			// A plain API server is runtime enough: bench modules need no
			// controller, scheduler or node, only their CRD.
			var err error
			b.runtimes[i], err = testcluster.StartControlPlane(gctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{crd}, APIServerArgs: serverArgs})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("starting API servers: %w", err)
	}

	clusters := map[string]string{"kcp": b.kcp.Dir()}
	if b.kcpCounter, err = newRequestCounter(b.kcp.Config()); err != nil {
		return err
	}
	for i, rt := range b.runtimes {
		clusters["runtime-"+strconv.Itoa(i)] = rt.Dir()
		counter, err := newRequestCounter(rt.Config())
		if err != nil {
			return err
		}
		b.runtimeCounters = append(b.runtimeCounters, counter)
	}
	children, err := findChildren(clusters)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.children = children
	b.mu.Unlock()

	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	b.client, err = client.New(withLimits(b.kcp.Config(), b.opts.KCPQPS, b.opts.KCPBurst), client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating the control-plane client: %w", err)
	}
	if err := remote.EnsureNamespace(ctx, b.client, namespace); err != nil {
		return err
	}
	b.registry = testregistry.Start()
	if b.opts.Backup != nil {
		if err := b.setupBackups(); err != nil {
			return err
		}
	}
	return publishModules(ctx, b.client, b.registry.Host(), namespace, b.modules)
}

// measureRawWrites runs the raw write loop and checks it against the API
// server's own count.
func (b *bench) measureRawWrites(ctx context.Context) error {
	b.setPhase(phaseRaw)
	before, err := b.kcpCounter.read(ctx)
	if err != nil {
		return err
	}
	raw, err := rawWriteRate(ctx, b.client, b.opts.RawWrites, b.opts.RawConcurrency)
	if err != nil {
		return err
	}
	after, err := b.kcpCounter.read(ctx)
	if err != nil {
		return err
	}
	raw.Counted = after.Sub(before).Writes
	b.report.Raw = &raw
	fmt.Fprintf(b.opts.Progress, "raw write rate: %.0f writes/s (%d creates, %d workers)\n", raw.PerSecond, raw.Writes, raw.Concurrency)
	return nil
}

// readyInterval is d, or the operator's default when d is zero.
func readyInterval(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return operator.DefaultOptions().Intervals.Ready
}

// startOperator starts the operator in-process with its production
// defaults, except for the settings the benchmark varies, and waits until
// its caches are synced: one operator, or one per shard (Options.Shards).
func (b *bench) startOperator(ctx context.Context) error {
	opts := operator.DefaultOptions()
	opts.Config = withLimits(b.kcp.Config(), b.opts.KCPQPS, b.opts.KCPBurst)
	opts.Namespace = namespace
	opts.MetricsAddr = "0"
	opts.HealthProbeAddr = "0"
	opts.KymaConcurrency = b.opts.KymaConcurrency
	opts.ManifestConcurrency = b.opts.ManifestConcurrency
	opts.RuntimeQPS = b.opts.RuntimeQPS
	opts.RuntimeBurst = b.opts.RuntimeBurst
	opts.CatalogSync = b.opts.CatalogSync
	opts.Intervals.Ready = readyInterval(b.opts.ReadyInterval)
	opts.Content.InsecureRegistries = []string{b.registry.Host()}
	// The bench's Kymas stand for runtimes of their own but share a few API
	// servers, and the worker cap counts by API server: it would model
	// the whole fleet as that few runtimes.
	opts.MaxWorkersPerRuntime = 0
	if b.opts.Takeover {
		opts.KLMTakeover = takeover.All
	}
	b.configureBackups(&opts)

	shards := max(b.opts.Shards, 1)
	opCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stopOperator = stop
	b.operatorDone = make(chan error, shards)
	// Shards share this process, and so do the operators of earlier runs
	// in a test binary.
	opts.SharesProcess = true
	for id := range shards {
		if shards > 1 {
			// Each shard is a whole operator, as its own process would be
			// (its caches, its controllers, its clients), without leader
			// election: one process per shard.
			opts.Shard = shard.Shard{Count: shards, ID: id}
		}
		mgr, err := operator.New(opCtx, opts)
		if err != nil {
			return fmt.Errorf("creating the operator (shard %d of %d): %w", id, shards, err)
		}
		b.operators++
		b.caches = append(b.caches, mgr.GetCache())
		go func() { b.operatorDone <- mgr.Start(opCtx) }()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("the operator's caches did not sync: %w", ctx.Err())
		}
	}
	return nil
}

// heldByShard is what each operator's informers hold of the fleet once it
// is installed and filed: with shards, each its own share. The shards'
// leaders file the Kymas the benchmark created without a shard bucket while
// the install runs; until they are done, some objects are in every shard's
// cache. It waits up to filingWait for each Kyma and Manifest to be held
// once, and reports what the caches hold then.
func (b *bench) heldByShard(ctx context.Context) ([]ShardCache, error) {
	var out []ShardCache
	err := wait.PollUntilContextTimeout(ctx, time.Second, filingWait, true, func(ctx context.Context) (bool, error) {
		out = make([]ShardCache, 0, len(b.caches))
		objects := map[string]int{}
		for id, c := range b.caches {
			held, err := shard.Held(ctx, c)
			if err != nil {
				return false, fmt.Errorf("reading what shard %d's cache holds: %w", id, err)
			}
			for _, h := range held {
				objects[h.Kind] += h.Objects
			}
			out = append(out, ShardCache{Shard: id, Held: held})
		}
		return objects["Kyma"] == b.opts.Kymas && objects["Manifest"] == b.opts.Kymas*b.opts.Modules, nil
	})
	if wait.Interrupted(err) {
		fmt.Fprintf(b.opts.Progress, "the shards' caches still held some objects more than once after %s\n", filingWait)
		err = nil
	}
	return out, err
}

// filingWait bounds heldByShard's wait for the shards to file the fleet.
const filingWait = 2 * time.Minute

// snapshot is every counter at one moment.
type snapshot struct {
	at                 time.Time
	kcp, runtimes      Requests
	cpu                float64
	procs              map[string]ProcessSample
	kymaReconciles     float64
	manifestReconciles float64
	manifestChecks     float64
	benchWrites        int64
}

// snapshot reads every counter. It works on after ctx ended, so that a run
// that timed out still reports what it did.
func (b *bench) snapshot(ctx context.Context) (snapshot, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	s := snapshot{at: time.Now(), procs: sampleProcesses(b.children)}
	s.cpu, _ = selfCPU()
	s.kymaReconciles = counterValue(metrics.KymaReconciles)
	s.manifestReconciles = counterValue(metrics.ManifestReconciles)
	s.manifestChecks = manifestChecks()
	s.benchWrites = b.benchWrites.Load()
	var err error
	if s.kcp, err = b.kcpCounter.read(ctx); err != nil {
		return s, err
	}
	for _, c := range b.runtimeCounters {
		r, err := c.read(ctx)
		if err != nil {
			return s, err
		}
		s.runtimes = s.runtimes.Add(r)
	}
	return s, nil
}

// lightSnapshot reads only what costs no request: this process's and the
// children's CPU. The request counts are carried over from prev.
func (b *bench) lightSnapshot(prev snapshot) snapshot {
	s := prev
	s.at = time.Now()
	s.procs = sampleProcesses(b.children)
	s.cpu, _ = selfCPU()
	s.kymaReconciles = counterValue(metrics.KymaReconciles)
	s.manifestReconciles = counterValue(metrics.ManifestReconciles)
	s.manifestChecks = manifestChecks()
	return s
}

// waitQuiet waits, at most limit, until the operator's work queues are
// empty and no reconcile runs, so that the idle measurement starts in the
// steady state rather than in the tail of the last phase. It returns how
// long it waited.
func waitQuiet(ctx context.Context, limit time.Duration) time.Duration {
	start := time.Now()
	quiet := 0
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for quiet < 2 && time.Since(start) < limit {
		if operatorBusy() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-ticker.C:
		}
	}
	return time.Since(start)
}

// operatorBusy is the operator's queued and running reconciles, from
// controller-runtime's metrics.
func operatorBusy() float64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	busy := 0.0
	for _, f := range families {
		if f.GetName() != "workqueue_depth" && f.GetName() != "controller_runtime_active_workers" {
			continue
		}
		for _, m := range f.GetMetric() {
			busy += m.GetGauge().GetValue()
		}
	}
	return busy
}

// runPhase starts a phase, applies its load and waits until every Kyma
// reached the goal, or ctx ends; then it computes the phase's figures.
func (b *bench) runPhase(ctx context.Context, name string, g goal, baseline bool, load func(context.Context) error) (*Phase, error) {
	before, err := b.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	b.setPhase(name)
	version := g.version
	rec := b.tracker.begin(g, baseline)
	fmt.Fprintf(b.opts.Progress, "%s: started\n", name)
	stopProfiles := b.profileServers(ctx, name, rec.finished)
	defer stopProfiles()
	runErr := load(ctx)
	if runErr == nil {
		select {
		case <-rec.finished:
		case <-ctx.Done():
			runErr = context.Cause(ctx)
		}
	}
	if runErr == nil && name == phaseTakeover {
		// Every Kyma is Ready; the takeover ends when every Manifest
		// recorded it and KLM's are gone (takeover.go).
		b.kymasReady = time.Since(rec.start)
		runErr = b.waitTakenOver(ctx)
	}
	elapsed := time.Since(rec.start)
	notDone := b.tracker.notDone(5)
	done, stale := b.tracker.end()
	after, err := b.snapshot(ctx)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	b.addProcessCPU(name, before, after)

	p := &Phase{
		Name: name, Version: version, Seconds: elapsed.Seconds(),
		KymasDone: len(done), KymasTotal: b.opts.Kymas, Converged: runErr == nil,
		KCP: after.kcp.Sub(before.kcp), Runtimes: after.runtimes.Sub(before.runtimes),
		BenchWrites:        after.benchWrites - before.benchWrites,
		OperatorCPUSeconds: after.cpu - before.cpu,
		ProcessCPUSeconds:  cpuDelta(before.procs, after.procs),
		KymaReconciles:     after.kymaReconciles - before.kymaReconciles,
		ManifestReconciles: after.manifestReconciles - before.manifestReconciles,
		StaleReadyKymas:    stale,
	}
	if runErr != nil {
		p.NotDone = notDone
	}
	p.OperatorKCPWrites = p.KCP.Writes - float64(p.BenchWrites)
	// The Manifests the phase creates or moves.
	moved := b.opts.Modules
	if g.module != "" {
		moved = 1
	}
	manifests := float64(b.opts.Kymas * moved)
	p.KCPWritesPerMan = p.OperatorKCPWrites / manifests
	p.RuntimeWritesPerM = p.Runtimes.Writes / manifests
	p.MinimalKCPWrites, p.MinimalRuntimeWrites = minimalWrites(name, b.opts.Kymas, moved)
	// A rollout waits on purpose (its soaks), so its time says nothing of
	// how close the operator came to the API server's write rate.
	if b.report.Raw != nil && p.Converged && name != phaseRollout {
		p.Efficiency = efficiency(p.MinimalKCPWrites, b.report.Raw.PerSecond, p.Seconds)
		p.MachineEfficiency = efficiency(p.MinimalKCPWrites+p.MinimalRuntimeWrites, b.report.Raw.PerSecond, p.Seconds)
	}
	p.completionStats(done, elapsed)
	if name == phaseRollout {
		// Waves finish Kymas in steps by design; the rollout's own ideal
		// (Rollout.IdealSeconds) is the comparison that means something.
		p.RuntimeMajorIdealSeconds, p.RatioToIdeal = 0, 0
	}
	p.History.StatusWritesPerManifest = p.KCP.WritesByResource["manifests/status"] / manifests
	if p.History.Operations, err = countHistory(ctx, b.client, version); err != nil {
		return p, errors.Join(runErr, err)
	}
	fmt.Fprintf(b.opts.Progress, "%s: %d/%d Kymas done in %.1fs\n", name, p.KymasDone, p.KymasTotal, p.Seconds)
	if runErr != nil {
		return p, fmt.Errorf("%s: %d of %d Kymas reached %s after %.0fs: %w", name, p.KymasDone, p.KymasTotal, version, p.Seconds, runErr)
	}
	return p, nil
}

// measureIdle watches the converged fleet for opts.Idle. The operator keeps
// its production intervals, so what it does here is what a steady fleet
// costs: drift checks of the objects whose Ready interval comes round.
func (b *bench) measureIdle(ctx context.Context) (*Idle, error) {
	b.setPhase(phaseIdle)
	settled := waitQuiet(ctx, 60*time.Second)
	before, err := b.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	// The snapshot parsed the API servers' metrics in this process; that is
	// the benchmark's CPU, not the operator's, so the measurement starts
	// after it (and the closing snapshot reads the CPU before its parsing).
	before.cpu, _ = selfCPU()
	fmt.Fprintf(b.opts.Progress, "idle: queues drained after %.1fs; measuring %s\n", settled.Seconds(), b.opts.Idle)
	if b.opts.IdleCPUProfile != "" {
		stopProfile, err := StartCPUProfile(b.opts.IdleCPUProfile)
		if err != nil {
			return nil, err
		}
		defer stopProfile()
	}
	timer := time.NewTimer(b.opts.Idle)
	defer timer.Stop()
	var waitErr error
	select {
	case <-timer.C:
	case <-ctx.Done():
		waitErr = context.Cause(ctx)
	}
	after, err := b.snapshot(ctx)
	if err != nil {
		return nil, errors.Join(waitErr, err)
	}
	b.addProcessCPU(phaseIdle, before, after)
	secs := after.at.Sub(before.at).Seconds()
	idle := &Idle{
		Seconds:            secs,
		SettleSeconds:      settled.Seconds(),
		OperatorCPUSeconds: after.cpu - before.cpu,
		KCP:                after.kcp.Sub(before.kcp),
		Runtimes:           after.runtimes.Sub(before.runtimes),
		KymaReconciles:     after.kymaReconciles - before.kymaReconciles,
		ManifestReconciles: after.manifestReconciles - before.manifestReconciles,
		ManifestChecks:     after.manifestChecks - before.manifestChecks,
		ProcessCPUSeconds:  cpuDelta(before.procs, after.procs),
	}
	idle.OperatorCPUShare = idle.OperatorCPUSeconds / secs
	if waitErr != nil {
		return idle, fmt.Errorf("idle measurement cut short: %w", waitErr)
	}
	return idle, nil
}

// StartCPUProfile profiles this process's CPU into path until the returned
// function is called.
func StartCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func (b *bench) setPhase(name string) {
	b.mu.Lock()
	b.phase = name
	b.mu.Unlock()
}

func (b *bench) addProcessCPU(phase string, before, after snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.phaseProcs == nil {
		b.phaseProcs = map[string]map[string]float64{}
	}
	b.phaseProcs[phase] = cpuDelta(before.procs, after.procs)
	b.lastProcs = after.procs
}

// sampleTimeline records the fleet every SampleInterval and prints a
// progress line with the rates since the previous sample.
func (b *bench) sampleTimeline(ctx context.Context) {
	ticker := time.NewTicker(b.opts.SampleInterval)
	defer ticker.Stop()
	prev := b.timelineRef
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		b.mu.Lock()
		phase := b.phase
		b.mu.Unlock()
		var s snapshot
		if phase == phaseIdle {
			// No /metrics scrapes while the idle fleet is measured: parsing
			// them would be most of the CPU this process uses.
			s = b.lightSnapshot(prev)
		} else {
			var err error
			if s, err = b.snapshot(ctx); err != nil {
				fmt.Fprintf(b.opts.Progress, "sampling: %v\n", err)
				continue
			}
		}
		_, _, heap := b.mem.peaks()
		b.mu.Lock()
		sample := Sample{
			Seconds: s.at.Sub(b.report.Started).Seconds(), Phase: phase, KymasDone: b.tracker.progress(),
			KCPWrites: s.kcp.Writes - b.timelineRef.kcp.Writes, RuntimeWrites: s.runtimes.Writes - b.timelineRef.runtimes.Writes,
			OperatorCPUSeconds: s.cpu - b.timelineRef.cpu, HeapInuseBytes: heap, OperatorRSSBytes: selfRSS(),
			ProcessCPUSeconds: cpuDelta(b.timelineRef.procs, s.procs), ProcessRSSBytes: rssOf(s.procs),
		}
		b.report.Timeline = append(b.report.Timeline, sample)
		b.mu.Unlock()
		fmt.Fprintln(b.opts.Progress, progressLine(sample, prev, s, phase != phaseIdle))
		if left := b.opts.Kymas - sample.KymasDone; left > 0 && left <= 3 {
			if waiting := b.tracker.notDone(3); len(waiting) > 0 {
				fmt.Fprintf(b.opts.Progress, "  waiting for: %s\n", strings.Join(waiting, "; "))
			}
		}
		prev = s
	}
}

// progressLine says how far the phase got and what is busy; write rates
// only when the request counters were read.
func progressLine(sample Sample, prev, cur snapshot, withWrites bool) string {
	dt := cur.at.Sub(prev.at).Seconds()
	type busy struct {
		name  string
		cores float64
	}
	loads := []busy{{"operator", (cur.cpu - prev.cpu) / dt}}
	for name, c := range cur.procs {
		loads = append(loads, busy{name, (c.CPUSeconds - prev.procs[name].CPUSeconds) / dt})
	}
	slices.SortFunc(loads, func(a, b busy) int {
		switch {
		case a.cores > b.cores:
			return -1
		case a.cores < b.cores:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	parts := make([]string, 0, 4)
	for _, l := range loads[:min(4, len(loads))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", l.name, l.cores))
	}
	writes := ""
	if withWrites {
		writes = fmt.Sprintf(" | writes/s KCP %5.0f, runtimes %5.0f", (cur.kcp.Writes-prev.kcp.Writes)/dt, (cur.runtimes.Writes-prev.runtimes.Writes)/dt)
	}
	return fmt.Sprintf("[%6.0fs] %-7s %6d Kymas done%s | cores: %s | heap %s",
		sample.Seconds, sample.Phase, sample.KymasDone, writes,
		strings.Join(parts, ", "), bytesIEC(int64(sample.HeapInuseBytes)))
}

// close stops everything the run started, in reverse order.
func (b *bench) close() {
	if b.stopOperator != nil {
		b.stopOperator()
		deadline := time.After(time.Minute)
	wait:
		for range b.operators {
			select {
			case err := <-b.operatorDone:
				if err != nil {
					fmt.Fprintf(b.opts.Progress, "operator: %v\n", err)
				}
			case <-deadline:
				fmt.Fprintln(b.opts.Progress, "operator: did not stop within a minute")
				break wait
			}
		}
	}
	if b.stopBackground != nil {
		b.stopBackground()
		b.background.Wait()
	}
	if b.registryProxy != nil {
		b.registryProxy.server.Close()
	}
	if b.registry != nil {
		b.registry.Close()
	}
	for _, c := range append([]*testcluster.ControlPlane{b.kcp}, b.runtimes...) {
		if c != nil {
			if err := c.Stop(); err != nil {
				fmt.Fprintf(b.opts.Progress, "stopping an API server: %v\n", err)
			}
		}
	}
	if b.tmpDir != "" {
		_ = os.RemoveAll(b.tmpDir)
	}
}

// finish fills the figures that cover the whole run.
func (b *bench) finish(err error) {
	r := b.report
	heap, sys, _ := b.mem.peaks()
	_, maxRSS := selfCPU()
	r.Memory = Memory{PeakHeapInuseBytes: heap, PeakGoSysBytes: sys, MaxRSSBytes: maxRSS}
	r.Memory.perManifest(r.Install, r.Scenario.Manifests)
	r.Machine.LoadAverageEnd = loadAverage()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lastProcs) > 0 {
		r.Processes = map[string]ProcessFigures{}
		for name, s := range b.lastProcs {
			figures := ProcessFigures{CPUSecondsByPhase: map[string]float64{}, RSSBytes: s.RSSBytes, PeakRSSBytes: s.PeakRSSBytes}
			for phase, procs := range b.phaseProcs {
				figures.CPUSecondsByPhase[phase] = procs[name]
			}
			r.Processes[name] = figures
		}
	}
	r.Converged = err == nil && r.Install != nil && r.Install.Converged && (r.Upgrade == nil || r.Upgrade.Converged) && (r.Backups == nil || r.Backups.Converged)
	if err != nil {
		r.Error = err.Error()
	}
}

func rssOf(procs map[string]ProcessSample) map[string]int64 {
	out := make(map[string]int64, len(procs))
	for name, p := range procs {
		out[name] = p.RSSBytes
	}
	return out
}

func counterValue(c prometheus.Counter) float64 {
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// manifestChecks is how many periodic Manifest checks ran without a
// reconcile, whatever they found.
func manifestChecks() float64 {
	return counterValue(metrics.ManifestChecks.WithLabelValues(metrics.CheckUnchanged)) +
		counterValue(metrics.ManifestChecks.WithLabelValues(metrics.CheckReconcile))
}

// machineInfo describes the machine from /proc; what cannot be read is left
// empty.
func machineInfo() Machine {
	m := Machine{CPUs: goruntime.NumCPU(), GoVersion: goruntime.Version() + " " + goruntime.GOOS + "/" + goruntime.GOARCH}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					m.MemoryBytes = kb * 1024
				}
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(data))
	}
	m.LoadAverageStart = loadAverage()
	return m
}

// availableMemory is MemAvailable from /proc/meminfo; 0 when unreadable.
func availableMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

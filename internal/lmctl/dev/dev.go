// Package dev is `lmctl dev`: a local fleet in one command (SPEC R17). It
// builds or reuses the control-plane binaries, starts a control plane and
// kwok runtimes (or attaches existing clusters), a registry with the bundled
// sample modules, a stand-in operator for the sample module, the lifecycle
// manager itself in-process and a runtime-watcher per local runtime;
// registers every runtime with a Kyma; shows the fleet converge; and stays
// up until interrupted, then stops everything it started.
//
// It is built from the same parts the end-to-end tests use (testcluster,
// testregistry, samplemodules, operator.New, agent), so that what a
// newcomer sees is what the tests check.
package dev

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/console"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/status"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
)

// Namespace is the control-plane namespace of the session: the operator's
// default, so that every command and kubectl line works without -n.
const Namespace = "kcp-system"

// DefaultModules go into every local runtime's Kyma. evolving is left out
// on purpose: adding it by hand is the first thing the summary suggests.
// template-operator is the module developer kit's template operator,
// packaged by `lmctl module`'s code, its manager running in-process.
var DefaultModules = []string{samplemodules.Sample, samplemodules.Chart, templateoperator.Name}

// attachedDefaultModules go into attached clusters' Kymas: the sample and
// chart modules run placeholder images that only a kwok node "runs", so a
// real cluster would pull them forever; evolving is ConfigMaps only.
var attachedDefaultModules = []string{samplemodules.Evolving}

// Options configure a session; `lmctl dev`'s flags fill them.
type Options struct {
	// Runtimes is the number of local kwok runtimes.
	Runtimes int
	// RuntimeKubeconfigs attach existing clusters as runtimes.
	RuntimeKubeconfigs []string
	// Modules each Kyma lists; nil means DefaultModules (or, with attached
	// clusters, attachedDefaultModules).
	Modules []string
	// Dir is the state directory; empty means .dev in the checkout, or a
	// new temporary directory outside one.
	Dir string
	// Keep keeps Dir and the clusters' directories after the session.
	Keep bool
	// ExitWhenReady ends the session once everything is Ready, and fails
	// it when that does not happen within Timeout.
	ExitWhenReady bool
	// Timeout is how long the fleet may take to become Ready, counted after
	// the binaries are built.
	Timeout time.Duration
	// ErrorGrace is how long a module may stay in Error with the same
	// message before ExitWhenReady gives up early.
	ErrorGrace time.Duration
	// ReadyFile, when set, is written (as JSON, see Environment) once
	// everything is Ready and removed when the session ends.
	ReadyFile string
	// BrokenModule adds a module that cannot render (BrokenModule), to
	// test the failure path.
	BrokenModule bool
	// ConsoleListen is where the fleet console is served (docs/console.md);
	// empty means any free port of 127.0.0.1.
	ConsoleListen string

	// Out receives progress and the summary.
	Out io.Writer
	// TTY makes progress a live table instead of lines.
	TTY bool
	// Width is the terminal's width, for the live table.
	Width func() int
}

// Environment is what a running session offers, as printed when it is
// Ready and as written to Options.ReadyFile for scripts.
type Environment struct {
	Dir           string `json:"dir"`
	KCPKubeconfig string `json:"kcpKubeconfig"`
	Namespace     string `json:"namespace"`
	Registry      string `json:"registry"`
	OperatorLog   string `json:"operatorLog"`
	// BackupIdentity is the identity file that decrypts the dev backups.
	BackupIdentity string `json:"backupIdentity"`
	// Console is the fleet console's URL, with its token.
	Console  string               `json:"console"`
	Runtimes []EnvironmentRuntime `json:"runtimes"`
	PID      int                  `json:"pid"`
}

// EnvironmentRuntime is one runtime of a session.
type EnvironmentRuntime struct {
	Name       string   `json:"name"`
	RuntimeID  string   `json:"runtimeID"`
	Kubeconfig string   `json:"kubeconfig"`
	Attached   bool     `json:"attached,omitempty"`
	Modules    []string `json:"modules"`
}

// pollInterval is how often the fleet is looked at while converging.
const pollInterval = 500 * time.Millisecond

// Run runs a session until ctx ends (interactive) or the fleet is Ready
// (ExitWhenReady). An interrupted interactive session is a normal end and
// returns nil; everything started is stopped before Run returns.
func Run(ctx context.Context, opts Options) (err error) {
	if err := opts.complete(); err != nil {
		return err
	}
	if err := ensureBinaries(ctx, opts.Out, opts.TTY); err != nil {
		return err
	}
	s := &session{opts: opts, out: opts.Out, start: time.Now()}

	dir, err := newStateDir(opts.Dir)
	if err != nil {
		return err
	}
	defer func() {
		if opts.Keep {
			fmt.Fprintf(s.out, "Kept %s (--keep).\n", dir.path)
			return
		}
		err = errors.Join(err, dir.remove())
	}()
	defer func() { err = errors.Join(err, s.stop()) }()

	w, env, intervals, err := s.bringUp(ctx, dir)
	if err != nil {
		return err
	}
	return s.serve(ctx, w, env, intervals)
}

// session is one run of lmctl dev: what it started, stopped in reverse
// order when it ends.
type session struct {
	opts  Options
	out   io.Writer
	start time.Time
	// stops run last first: the agents before the operator, the operator
	// before the clusters, so that nothing spends its last seconds failing
	// to reach what already stopped.
	stops []func() error
}

func (s *session) onStop(stop func() error) { s.stops = append(s.stops, stop) }

func (s *session) stop() error {
	if len(s.stops) == 0 {
		return nil
	}
	stopping := time.Now()
	fmt.Fprintln(s.out, "Stopping the operator and the clusters ...")
	var err error
	for i := len(s.stops) - 1; i >= 0; i-- {
		err = errors.Join(err, s.stops[i]())
	}
	fmt.Fprintf(s.out, "Stopped in %s.\n", formatElapsed(time.Since(stopping)))
	return err
}

// bringUp starts the clusters, the registry with the sample catalog, the
// agents, the operator and the runtimes' Kymas.
func (s *session) bringUp(ctx context.Context, dir *stateDir) (*watch, Environment, requeue.Intervals, error) {
	logFile, err := logToFile(dir.file("operator.log"))
	if err != nil {
		return nil, Environment{}, requeue.Intervals{}, err
	}
	cl, kcpClient, registry, err := s.startClustersAndCatalog(ctx, dir)
	if err != nil {
		return nil, Environment{}, requeue.Intervals{}, err
	}
	env := Environment{
		Dir:            dir.path,
		KCPKubeconfig:  dir.file("kcp.kubeconfig"),
		Namespace:      Namespace,
		Registry:       registry,
		OperatorLog:    logFile.Name(),
		BackupIdentity: dir.file(BackupIdentityFile),
		PID:            os.Getpid(),
	}
	intervals := devIntervals(len(s.opts.RuntimeKubeconfigs) > 0)
	watchers, err := newRuntimeWatchers(ctx, logFile)
	if err != nil {
		return nil, Environment{}, requeue.Intervals{}, err
	}
	op, err := startOperator(ctx, cl.kcp.Config(), Namespace, registry, env.BackupIdentity, intervals, watchers, logFile)
	if err != nil {
		watchers.stop()
		return nil, Environment{}, requeue.Intervals{}, err
	}
	s.onStop(op.stop)
	s.onStop(func() error { watchers.stop(); return nil })
	// The console reads the control plane as the session's own admin, as
	// lmctl console reads with its user's kubeconfig.
	fleetConsole, err := console.ServeLocal(ctx, cl.kcp.Config(), Namespace, cmp.Or(s.opts.ConsoleListen, "127.0.0.1:0"))
	if err != nil {
		return nil, Environment{}, requeue.Intervals{}, err
	}
	s.onStop(fleetConsole.Close)
	env.Console = fleetConsole.URL
	fmt.Fprintf(s.out, "The fleet console: %s\n", fleetConsole.URL)

	sampleCtx, stopSamples := context.WithCancel(ctx)
	s.onStop(func() error { stopSamples(); return nil })
	for _, rt := range cl.runtimes {
		if err := startRuntime(ctx, sampleCtx, kcpClient, rt, s.opts.Modules, watchers); err != nil {
			return nil, Environment{}, requeue.Intervals{}, err
		}
		env.Runtimes = append(env.Runtimes, EnvironmentRuntime{
			Name: rt.Name, RuntimeID: rt.ID, Kubeconfig: rt.KubeconfigPath, Attached: rt.Attached, Modules: s.opts.Modules,
		})
	}
	fmt.Fprintf(s.out, "Registered %s with modules %s; the operator logs to %s.\n",
		plural(len(cl.runtimes), "runtime"), strings.Join(s.opts.Modules, ", "), env.OperatorLog)
	describeWatchers(s.out, cl.runtimes, watchers, intervals)
	fmt.Fprintln(s.out)
	return &watch{opts: s.opts, client: kcpClient, op: op, start: s.start, tracker: newTracker()}, env, intervals, nil
}

// startClustersAndCatalog starts the control plane and the runtimes, and
// the registry with the sample modules published; it returns the
// registry's host.
func (s *session) startClustersAndCatalog(ctx context.Context, dir *stateDir) (*clusters, client.Client, string, error) {
	fmt.Fprintf(s.out, "Starting a control plane and %s (state in %s) ...\n", describeRuntimes(s.opts), dir.path)
	cl, err := startClusters(ctx, dir, s.opts.Runtimes, s.opts.RuntimeKubeconfigs, s.opts.Keep)
	if err != nil {
		return nil, nil, "", fmt.Errorf("starting clusters: %w", err)
	}
	s.onStop(cl.stop)
	fmt.Fprintf(s.out, "Clusters are up after %s.\n", formatElapsed(time.Since(s.start)))

	kcpClient, err := prepareControlPlane(ctx, cl)
	if err != nil {
		return nil, nil, "", err
	}
	registry := testregistry.Start()
	s.onStop(func() error { registry.Close(); return nil })
	if err := publishCatalog(ctx, kcpClient, registry.Host(), Namespace, s.opts.BrokenModule); err != nil {
		return nil, nil, "", err
	}
	fmt.Fprintf(s.out, "Published the sample modules to the registry at %s.\n", registry.Host())
	return cl, kcpClient, registry.Host(), nil
}

// serve waits until the fleet is Ready, prints the tour, and follows it
// until Ctrl-C (or returns at once with --exit-when-ready).
func (s *session) serve(ctx context.Context, w *watch, env Environment, intervals requeue.Intervals) error {
	fleet, err := w.untilReady(ctx)
	if err != nil {
		if ctx.Err() != nil && !s.opts.ExitWhenReady {
			fmt.Fprintln(s.out)
			return nil // Ctrl-C before Ready: the user is done
		}
		return err
	}
	ready, total := fleet.ModuleCounts()
	fmt.Fprintf(s.out, "\nAll Ready: %s, %d/%d modules, %s after start.\n", plural(len(fleet.Runtimes), "runtime"), ready, total, formatElapsed(time.Since(s.start)))
	if s.opts.ExitWhenReady {
		return nil
	}
	if s.opts.ReadyFile != "" {
		if err := writeReadyFile(s.opts.ReadyFile, env); err != nil {
			return err
		}
		defer os.Remove(s.opts.ReadyFile)
	}
	printTour(s.out, env, s.opts.Modules, s.opts.Keep, intervals.Ready)
	if err := w.follow(ctx); err != nil {
		return err
	}
	fmt.Fprintln(s.out)
	return nil
}

// complete fills in defaults and refuses what cannot work, before anything
// is built or started.
func (o *Options) complete() error {
	if o.Runtimes < 0 {
		return errors.New("--runtimes must not be negative")
	}
	if o.Runtimes == 0 && len(o.RuntimeKubeconfigs) == 0 {
		return errNoRuntimes
	}
	if o.Modules == nil {
		o.Modules = DefaultModules
		if len(o.RuntimeKubeconfigs) > 0 {
			o.Modules = attachedDefaultModules
		}
	}
	if o.BrokenModule {
		o.Modules = append(slices.Clone(o.Modules), BrokenModule)
	}
	for _, path := range o.RuntimeKubeconfigs {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("--runtime-kubeconfig: %w", err)
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Dir == "" {
		// One well-known place per checkout (git-ignored), so that paths
		// like .dev/kcp.kubeconfig stay the same from one session to the
		// next; a second session in the same checkout is refused, not mixed in.
		if root, err := repoRoot(); err == nil {
			o.Dir = filepath.Join(root, ".dev")
		}
	}
	return nil
}

// prepareControlPlane creates the namespace the operator works in and
// returns a client for it.
func prepareControlPlane(ctx context.Context, cl *clusters) (client.Client, error) {
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cl.kcp.Config(), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a control-plane client: %w", err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	return c, nil
}

// startRuntime starts what runs beside one runtime (the sample module's
// stand-in operator and the template operator until sampleCtx ends, the runtime-watcher of a local
// runtime) and registers it with a Kyma.
func startRuntime(ctx, sampleCtx context.Context, kcp client.Client, rt *runtimeTarget, modules []string, watchers *runtimeWatchers) error {
	// It polls: quickly on a local runtime, gently on someone's cluster.
	interval := 200 * time.Millisecond
	if rt.Attached {
		interval = time.Second
	}
	go func() { _ = samplemodules.RunSampleOperator(sampleCtx, rt.config, interval) }()
	if !rt.Attached || slices.Contains(modules, templateoperator.Name) {
		// The template operator's manager, as its Deployment would run it;
		// it waits for its CRD, which the module installs.
		go func() {
			_ = templateoperator.Run(sampleCtx, rt.config, templateoperator.RunOptions{CRDPoll: interval})
		}()
	}
	if err := watchers.start(rt); err != nil {
		return fmt.Errorf("starting the runtime-watcher for %s: %w", rt.Name, err)
	}
	return register(ctx, kcp, Namespace, rt, modules)
}

// describeWatchers says which runtimes report their changes at once, and
// why attached ones do not.
func describeWatchers(out io.Writer, runtimes []*runtimeTarget, watchers *runtimeWatchers, intervals requeue.Intervals) {
	var local, attached []string
	for _, rt := range runtimes {
		if rt.Attached {
			attached = append(attached, rt.Name)
		} else {
			local = append(local, rt.Name)
		}
	}
	if len(local) > 0 {
		fmt.Fprintf(out, "Started a runtime-watcher for %s, reporting changes to the operator's listener at %s.\n",
			strings.Join(local, ", "), watchers.listenerURL())
	}
	if len(attached) > 0 {
		fmt.Fprintf(out, "No runtime-watcher for %s: an attached cluster cannot call this machine's loopback address; changes made there are picked up every %s.\n",
			strings.Join(attached, ", "), intervals.Ready)
	}
}

func describeRuntimes(opts Options) string {
	var parts []string
	if opts.Runtimes > 0 {
		parts = append(parts, plural(opts.Runtimes, "local runtime"))
	}
	if n := len(opts.RuntimeKubeconfigs); n > 0 {
		parts = append(parts, plural(n, "attached runtime"))
	}
	return strings.Join(parts, " and ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func writeReadyFile(path string, env Environment) error {
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the ready file: %w", err)
	}
	// Written under another name and renamed, so that a script polling for
	// the file never reads half of it.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the ready file: %w", err)
	}
	return nil
}

// watch follows the fleet in the control plane and shows it.
type watch struct {
	opts    Options
	client  client.Reader
	op      *runningOperator
	start   time.Time
	tracker *tracker
	table   *liveTable
	// converged is set once the fleet was Ready: changes are then stamped
	// with the time of day, since elapsed time no longer means anything.
	converged bool
}

// untilReady shows progress until every module of every runtime is Ready,
// and returns the fleet as last seen. It fails when the operator stops,
// and, with ExitWhenReady, at the timeout or when a module stays in Error
// for ErrorGrace. Without ExitWhenReady the timeout only prints what is not
// Ready, and waiting goes on: a person is watching and can look into it.
func (w *watch) untilReady(ctx context.Context) (status.Fleet, error) {
	out := w.opts.Out
	deadline := w.start.Add(w.opts.Timeout)
	warned := false
	if w.opts.TTY {
		w.table = &liveTable{out: out}
	}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var fleet status.Fleet
	for {
		now := time.Now()
		current, err := status.Get(ctx, w.client, Namespace)
		if err == nil {
			fleet = current
			w.show(now, fleet)
			if allReady(fleet, w.opts.Runtimes+len(w.opts.RuntimeKubeconfigs)) {
				return fleet, nil
			}
		}
		if err := w.op.failed(); err != nil {
			return fleet, err
		}
		if w.opts.ExitWhenReady {
			if stuck := w.tracker.stuck(now, w.opts.ErrorGrace); len(stuck) > 0 {
				return fleet, fmt.Errorf("not all modules became Ready: %s stayed in Error for %s:\n  %s",
					joinKeys(stuck), w.opts.ErrorGrace, strings.Join(notReadyReport(fleet), "\n  "))
			}
		}
		if !warned && now.After(deadline) {
			report := strings.Join(notReadyReport(fleet), "\n  ")
			if err != nil {
				report = "the control plane cannot be read: " + err.Error()
			}
			if w.opts.ExitWhenReady {
				return fleet, fmt.Errorf("not all modules Ready within %s:\n  %s", w.opts.Timeout, report)
			}
			w.table = nil // the warning would be drawn over
			fmt.Fprintf(out, "Not all modules are Ready after %s; still waiting (Ctrl-C to stop):\n  %s\n", w.opts.Timeout, report)
			warned = true
		}
		select {
		case <-ctx.Done():
			if w.opts.ExitWhenReady {
				return fleet, fmt.Errorf("interrupted before all modules were Ready: %w", ctx.Err())
			}
			return fleet, ctx.Err()
		case <-ticker.C:
		}
	}
}

// show draws the live table, or prints a line per change.
func (w *watch) show(now time.Time, fleet status.Fleet) {
	changes := w.tracker.observe(now, fleet)
	elapsed := now.Sub(w.start)
	if w.table != nil {
		width := 0
		if w.opts.Width != nil {
			width = w.opts.Width()
		}
		w.table.draw(renderProgress(fleet, elapsed, width))
		return
	}
	when := formatElapsed(elapsed)
	if w.converged {
		when = now.Format(time.TimeOnly)
	}
	for _, c := range changes {
		fmt.Fprintln(w.opts.Out, formatChange(when, c))
	}
}

// follow prints a line per change until ctx ends: after the summary, so
// that what a person does in the fleet shows up under the commands they
// copied from it.
func (w *watch) follow(ctx context.Context) error {
	w.table = nil
	w.converged = true
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if fleet, err := status.Get(ctx, w.client, Namespace); err == nil {
			w.show(time.Now(), fleet)
		}
		if err := w.op.failed(); err != nil {
			return err
		}
	}
}

func joinKeys(keys []moduleKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}

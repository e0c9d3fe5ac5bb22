package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
)

// ReactionOptions configure the reaction benchmark (issue 12, "reaction
// time for one runtime"): how quickly one runtime's change shows on its
// Kyma, and how quickly a starting operator writes a Kyma's first status.
type ReactionOptions struct {
	// Repetitions is how many modules are added to the Kyma one after
	// another; each is one reaction measured.
	Repetitions int
	// Starts is how many times the operator binary is started to measure
	// the time to a Kyma's first status; zero skips it.
	Starts int
	// MaxHold is the longest the stand-in module operator waits, at random,
	// between the module being installed and it becoming ready, so that
	// the moment of readiness falls anywhere in the operator's requeue
	// intervals.
	MaxHold time.Duration
	// Progress receives a line per measurement; nil discards them.
	Progress io.Writer
}

// DefaultReactionOptions are 20 reactions (a Kyma growing to 20 modules, the
// fleet target's size) and 5 operator starts.
func DefaultReactionOptions() ReactionOptions {
	return ReactionOptions{Repetitions: 20, Starts: 5, MaxHold: time.Second}
}

// ReactionReport holds the measured durations, in seconds.
type ReactionReport struct {
	Repetitions int `json:"repetitions"`
	// Reaction is, for each module, the time from the moment its manager
	// is Available and its default CR Ready to the Kyma showing Ready.
	Reaction Durations `json:"reaction"`
	// FirstStatus is, for each start of the operator binary, the time from
	// starting the process to the first status on a Kyma it had never seen.
	FirstStatus Durations `json:"firstStatus"`
}

// Durations are samples in seconds with their summary.
type Durations struct {
	Samples []float64 `json:"samples"`
	P50     float64   `json:"p50"`
	P95     float64   `json:"p95"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
}

func summarize(samples []float64) Durations {
	d := Durations{Samples: samples}
	if len(samples) == 0 {
		return d
	}
	sorted := slices.Sorted(slices.Values(samples))
	d.P50, d.P95 = percentile(sorted, 0.5), percentile(sorted, 0.95)
	d.Min, d.Max = sorted[0], sorted[len(sorted)-1]
	return d
}

// Print writes the figures.
func (r *ReactionReport) Print(w io.Writer) {
	line := func(name string, d Durations) {
		if len(d.Samples) == 0 {
			return
		}
		fmt.Fprintf(w, "%-44s n=%-3d p50 %6.3fs  p95 %6.3fs  min %6.3fs  max %6.3fs\n", name, len(d.Samples), d.P50, d.P95, d.Min, d.Max)
	}
	line("module ready → Kyma Ready", r.Reaction)
	line("operator start → first Kyma status", r.FirstStatus)
}

// reactionKyma is the Kyma whose modules the reaction benchmark adds.
const reactionKyma = "reaction"

// reaction is one reaction run's state.
type reaction struct {
	oneRuntime
	opts    ReactionOptions
	modules []string
}

// RunReaction runs the reaction benchmark: a control plane, one runtime API
// server (no controllers: a stand-in plays kube-controller-manager and the
// module's operator), the operator with its production settings and the
// runtime watcher, whose agent runs in-process and is called by the
// runtime's API server. Every process it started is stopped before it
// returns.
func RunReaction(ctx context.Context, opts ReactionOptions) (*ReactionReport, error) {
	if opts.Repetitions < 0 || opts.Starts < 0 || opts.Repetitions+opts.Starts == 0 {
		return nil, errors.New("reaction: repetitions and starts must not be negative, and one of them positive")
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	r := &reaction{opts: opts, modules: reactionModuleNames(max(opts.Repetitions, 1))}
	defer r.close()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	report := &ReactionReport{Repetitions: opts.Repetitions}
	// The binary's starts come first: the in-process operator below never
	// stops, and each start has a control-plane namespace of its own.
	if opts.Starts > 0 {
		samples, err := r.measureStarts(ctx)
		report.FirstStatus = summarize(samples)
		if err != nil {
			return report, err
		}
	}
	if opts.Repetitions > 0 {
		samples, err := r.measureReactions(ctx)
		report.Reaction = summarize(samples)
		if err != nil {
			return report, err
		}
	}
	return report, nil
}

func (r *reaction) setup(ctx context.Context) error {
	start := time.Now()
	if err := r.start(ctx); err != nil {
		return err
	}
	namespaces := []string{namespace}
	for i := range r.opts.Starts {
		namespaces = append(namespaces, startNamespace(i))
	}
	for _, ns := range namespaces {
		if err := remote.EnsureNamespace(ctx, r.client, ns); err != nil {
			return err
		}
	}
	if err := publishReactionModules(ctx, r.client, r.registry.Host(), r.modules, namespaces); err != nil {
		return err
	}
	fmt.Fprintf(r.opts.Progress, "setup: control plane, runtime, registry and %d modules ready in %.1fs\n", len(r.modules), time.Since(start).Seconds())
	return nil
}

// measureReactions starts the operator and the runtime's agent, registers
// the Kyma, and adds one module at a time: the stand-in makes the module
// ready a random while after it was installed, and the time until the
// Kyma shows Ready is one sample.
func (r *reaction) measureReactions(ctx context.Context) ([]float64, error) {
	listenerAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	a, err := r.newAgent(listenerAddr)
	if err != nil {
		return nil, err
	}
	opCtx, stop := context.WithCancel(ctx)
	defer stop()
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Start(opCtx) }()
	operatorDone, err := r.startOperator(opCtx, listenerAddr, a.WebhookURL())
	if err != nil {
		return nil, err
	}
	defer func() {
		stop()
		// The run is over; how they stopped does not change the figures.
		if err := errors.Join(<-operatorDone, <-agentDone); err != nil {
			fmt.Fprintln(r.opts.Progress, "reaction: stopping:", err)
		}
	}()
	if err := r.registerKyma(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the Kyma without modules to be Ready: %w", err)
	}
	fmt.Fprintln(r.opts.Progress, "reaction: the Kyma without modules is Ready")
	if err := r.waitWatched(ctx, a); err != nil {
		return nil, fmt.Errorf("waiting for the runtime's API server to call the agent: %w", err)
	}
	fmt.Fprintln(r.opts.Progress, "reaction: the runtime's API server calls the agent")
	states := r.watchKyma(opCtx)
	var samples []float64
	for i := range r.opts.Repetitions {
		d, err := r.react(ctx, r.modules[i], states)
		if err != nil {
			return samples, fmt.Errorf("module %s: %w", r.modules[i], err)
		}
		samples = append(samples, d.Seconds())
		fmt.Fprintf(r.opts.Progress, "reaction %2d/%d (%s): Kyma Ready %.3fs after the module\n", i+1, r.opts.Repetitions, r.modules[i], d.Seconds())
	}
	return samples, nil
}

// react adds module to the Kyma and measures one reaction.
func (r *reaction) react(ctx context.Context, module string, states *kymaStates) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		k := &v1beta2.Kyma{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: reactionKyma}, k); err != nil {
			return err
		}
		k.Spec.Modules = append(k.Spec.Modules, v1beta2.Module{Name: module, Managed: true})
		return r.client.Update(ctx, k)
	}); err != nil {
		return 0, fmt.Errorf("adding the module: %w", err)
	}
	s := standIn{runtime: r.rtClient, namespace: v1beta2.DefaultRuntimeNamespace, module: module}
	manifestKey := client.ObjectKey{Namespace: namespace, Name: kyma.ManifestName(reactionKyma, module)}
	if err := s.waitInstalled(ctx); err != nil {
		return 0, fmt.Errorf("waiting for the module's manager and CR (Manifest: %s): %w", r.describe(manifestKey), err)
	}
	// The operator has seen the module waiting for its operator: the
	// Manifest and the Kyma say Processing.
	if err := poll(ctx, 10*time.Millisecond, func() (bool, error) {
		m := &v1beta2.Manifest{}
		if err := r.client.Get(ctx, manifestKey, m); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return m.Status.State == v1beta2.StateProcessing && states.current() == v1beta2.StateProcessing, nil
	}); err != nil {
		return 0, fmt.Errorf("waiting for the module to be Processing: %w", err)
	}
	hold := time.Duration(rand.Int64N(int64(r.opts.MaxHold) + 1))
	select {
	case <-time.After(hold):
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	readyAt, err := s.becomeReady(ctx)
	if err != nil {
		return 0, err
	}
	shown, err := states.readyAfter(ctx, readyAt)
	if err != nil {
		return 0, fmt.Errorf("waiting for the Kyma to show Ready: %w", err)
	}
	return shown.Sub(readyAt), nil
}

// describe says how a Manifest stands, for an error message.
func (r *reaction) describe(key client.ObjectKey) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m := &v1beta2.Manifest{}
	if err := r.client.Get(ctx, key, m); err != nil {
		k := &v1beta2.Kyma{}
		_ = r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: reactionKyma}, k)
		return fmt.Sprintf("%v; Kyma: %+v", err, k.Status)
	}
	var conditions []string
	for _, c := range m.Status.Conditions {
		conditions = append(conditions, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("state %q, %v", m.Status.State, conditions)
}

// newAgent creates the runtime's watcher agent, in-process on loopback,
// reading its Secrets with the runtime's admin config.
func (r *reaction) newAgent(listenerAddr string) (*agent.Agent, error) {
	opts := agent.DefaultOptions()
	opts.Config = r.runtime.Config()
	opts.Namespace = v1beta2.DefaultRuntimeNamespace
	opts.ListenAddress = "127.0.0.1:0"
	opts.MetricsAddress = "0"
	opts.ListenerURL = "https://" + listenerAddr
	opts.KymaName = reactionKyma
	return agent.New(opts)
}

// startOperator starts the operator in-process with its production
// settings and its runtime watcher in local mode (the agent's webhook is
// registered by URL).
func (r *reaction) startOperator(ctx context.Context, listenerAddr, agentURL string) (<-chan error, error) {
	opts := operator.DefaultOptions()
	opts.Config = r.kcp.Config()
	opts.Namespace = namespace
	opts.MetricsAddr, opts.HealthProbeAddr = "0", "0"
	opts.Content.InsecureRegistries = []string{r.registry.Host()}
	// The bench's Kymas share one API server; the worker cap counts by
	// API server (see bench.startOperator).
	opts.MaxWorkersPerRuntime = 0
	opts.Watcher = operator.DefaultWatcherOptions()
	opts.Watcher.ListenerAddress = listenerAddr
	opts.Watcher.ListenerNames = []string{"localhost", "127.0.0.1"}
	opts.Watcher.LocalAgentURL = func(*v1beta2.Kyma) string { return agentURL }
	mgr, err := operator.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the operator: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

// registerKyma creates the runtime's kubeconfig Secret and its Kyma, without
// modules, and waits until it is Ready.
func (r *reaction) registerKyma(ctx context.Context) error {
	if err := createRuntimeKyma(ctx, r.client, namespace, reactionKyma, r.runtime.Kubeconfig(), v1beta2.KymaSpec{Channel: benchChannel}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		k := &v1beta2.Kyma{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: reactionKyma}, k); err != nil {
			return false, err
		}
		return k.Status.State == v1beta2.StateReady, nil
	})
}

// createRuntimeKyma creates a Kyma with its kubeconfig Secret and runtime id.
func createRuntimeKyma(ctx context.Context, c client.Client, ns, name string, kubeconfig []byte, spec v1beta2.KymaSpec) error {
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: ns, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": kubeconfig},
	}); err != nil {
		return fmt.Errorf("creating the kubeconfig Secret of %s: %w", name, err)
	}
	if err := c.Create(ctx, &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{v1beta2.RuntimeIDLabel: "rt-" + name}},
		Spec:       spec,
	}); err != nil {
		return fmt.Errorf("creating Kyma %s: %w", name, err)
	}
	return nil
}

// reactionProbe is a Watcher of ConfigMaps labelled fleetbench-probe=yes,
// through which the benchmark sees that the runtime's API server calls the
// agent before it measures anything.
const (
	reactionProbe      = "reaction-probe"
	reactionProbeLabel = "fleetbench-probe"
)

// waitWatched returns once the runtime's API server calls the agent: an
// update of a probed ConfigMap reaches it.
func (r *reaction) waitWatched(ctx context.Context, a *agent.Agent) error {
	if err := r.client.Create(ctx, &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: reactionProbe, Namespace: namespace},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "lifecycle-manager-listener", Namespace: namespace, Port: 8443},
			LabelsToWatch:   map[string]string{reactionProbeLabel: "yes"},
			ResourceToWatch: v1beta2.WatchableGVR{Version: "v1", Resource: "configmaps"},
			Field:           v1beta2.SpecField,
		},
	}); err != nil {
		return fmt.Errorf("creating the probe Watcher: %w", err)
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: reactionProbe, Namespace: "default", Labels: map[string]string{reactionProbeLabel: "yes"}}}
	if err := r.rtClient.Create(ctx, probe); err != nil {
		return fmt.Errorf("creating the probe ConfigMap: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	reported := a.Metrics().AdmissionRequests.WithLabelValues("UPDATE", agent.ResultReported)
	return poll(ctx, 200*time.Millisecond, func() (bool, error) {
		before := counterValue(reported)
		probe.Data = map[string]string{"at": time.Now().String()}
		if err := r.rtClient.Update(ctx, probe); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return counterValue(reported) > before, nil
	})
}

// ignoreMissing ignores a missing object or kind (a CRD not served yet).
func ignoreMissing(err error) error {
	if apimeta.IsNoMatchError(err) {
		return nil
	}
	return client.IgnoreNotFound(err)
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startNamespace is the control-plane namespace of one operator start.
func startNamespace(i int) string {
	return fmt.Sprintf("first-status-%d", i)
}

package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// LoneOptions configure the lone-runtime benchmark (issue 33): one runtime
// with real-size modules, as a new user meets the operator.
type LoneOptions struct {
	// Modules is how many modules the Kyma lists from the start.
	Modules int
	// Repetitions is how many times the whole run is made, each with a
	// Kyma, modules and an operator start of its own.
	Repetitions int
	// MaxHold is the longest the stand-in module operator waits, at random,
	// between a module's manager and CR existing and making them ready.
	MaxHold time.Duration
	// MaxWorkersPerRuntime, ProgressInterval and RequeueProcessing are the
	// operator's --max-workers-per-runtime, --kyma-progress-interval and
	// --requeue-processing; a negative value keeps its default.
	MaxWorkersPerRuntime int
	ProgressInterval     time.Duration
	RequeueProcessing    time.Duration
	// RuntimeQPS and RuntimeBurst are the operator's --runtime-qps and
	// --runtime-burst; zero or less keeps its default.
	RuntimeQPS   float32
	RuntimeBurst int
	// Progress receives a line per measurement; nil discards them.
	Progress io.Writer
}

// DefaultLoneOptions are 11 modules, 3 repetitions, the operator's
// defaults.
func DefaultLoneOptions() LoneOptions {
	return LoneOptions{Modules: 11, Repetitions: 3, MaxHold: 500 * time.Millisecond, MaxWorkersPerRuntime: -1, ProgressInterval: -1, RequeueProcessing: -1}
}

// LoneReport holds the lone-runtime benchmark's figures, in seconds.
type LoneReport struct {
	Modules int `json:"modules"`
	// Objects are the objects the modules ship, default CRs included;
	// Synced are those their Manifests list as applied when the Kyma is
	// Ready (default CRs not included).
	Objects int `json:"objects"`
	Synced  int `json:"synced"`
	// InRuntime are the modules' objects found in the runtime when the
	// Kyma is Ready, and Left those still there and not being deleted when
	// it is gone: the fewest and the most of any repetition.
	InRuntime   int `json:"inRuntime"`
	Left        int `json:"leftAfterDelete"`
	Repetitions int `json:"repetitions"`
	// Ready is operator start → the Kyma shows Ready.
	Ready Durations `json:"ready"`
	// Applied is operator start → the last module's default CR exists:
	// the apply phase, which the worker caps bound.
	Applied Durations `json:"applied"`
	// Reaction is the stand-in's last CR status write → the Kyma shows
	// Ready.
	Reaction Durations `json:"reaction"`
	// Delete is the Kyma's deletion → the Kyma is gone, its modules
	// removed from the runtime.
	Delete Durations `json:"delete"`
	// CRAfterManager is, per module, its manager Deployment created → its
	// default CR created: the default CR is the module's last object, so
	// this is what its install spends after its content is applied.
	CRAfterManager Durations `json:"crAfterManager"`
}

// Print writes the figures.
func (r *LoneReport) Print(w io.Writer) {
	fmt.Fprintf(w, "one runtime, %d modules (%d objects), %d repetitions\n", r.Modules, r.Objects, r.Repetitions)
	fmt.Fprintf(w, "objects in the runtime when the Kyma is Ready: %d; left, not being deleted, when it is gone: %d\n", r.InRuntime, r.Left)
	for _, l := range []struct {
		name string
		d    Durations
	}{
		{"operator start → Kyma Ready", r.Ready},
		{"operator start → last default CR applied", r.Applied},
		{"last module CR Ready → Kyma Ready", r.Reaction},
		{"Kyma deleted → gone", r.Delete},
		{"a module's manager created → its default CR", r.CRAfterManager},
	} {
		if len(l.d.Samples) > 0 {
			fmt.Fprintf(w, "%-44s n=%-3d p50 %6.3fs  min %6.3fs  max %6.3fs\n", l.name, len(l.d.Samples), l.d.P50, l.d.Min, l.d.Max)
		}
	}
}

// lone is one lone-runtime run's state.
type lone struct {
	oneRuntime
	opts    LoneOptions
	dynamic dynamic.Interface
}

// loneSample is one repetition's measurements.
type loneSample struct {
	ready, applied, reaction, deleted time.Duration
	objects, synced, inRuntime, left  int
	crAfterManager                    []float64
}

// RunLone runs the lone-runtime benchmark: a control plane and one runtime
// API server (no controllers: a stand-in plays kube-controller-manager and
// the modules' operators), a registry, and the operator in-process with its
// production settings and no watcher agent.
func RunLone(ctx context.Context, opts LoneOptions) (*LoneReport, error) {
	if opts.Modules <= 0 || opts.Repetitions <= 0 {
		return nil, errors.New("lone: modules and repetitions must be positive")
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	l := &lone{opts: opts}
	defer l.close()
	if err := l.setup(ctx); err != nil {
		return nil, err
	}
	report := &LoneReport{Modules: opts.Modules, Repetitions: opts.Repetitions}
	var ready, applied, reaction, deleted, crAfterManager []float64
	report.InRuntime = -1
	for rep := range opts.Repetitions {
		s, err := l.repetition(ctx, rep)
		if err != nil {
			return report, fmt.Errorf("repetition %d: %w", rep+1, err)
		}
		report.Objects, report.Synced = s.objects, s.synced
		if report.InRuntime < 0 || s.inRuntime < report.InRuntime {
			report.InRuntime = s.inRuntime
		}
		report.Left = max(report.Left, s.left)
		ready, applied = append(ready, s.ready.Seconds()), append(applied, s.applied.Seconds())
		reaction, deleted = append(reaction, s.reaction.Seconds()), append(deleted, s.deleted.Seconds())
		crAfterManager = append(crAfterManager, s.crAfterManager...)
		fmt.Fprintf(opts.Progress, "repetition %d/%d: Ready %.3fs after the operator's start (applied %.3fs), %.3fs after the last CR; deleted in %.3fs\n",
			rep+1, opts.Repetitions, s.ready.Seconds(), s.applied.Seconds(), s.reaction.Seconds(), s.deleted.Seconds())
	}
	report.Ready, report.Applied = summarize(ready), summarize(applied)
	report.Reaction, report.Delete = summarize(reaction), summarize(deleted)
	report.CRAfterManager = summarize(crAfterManager)
	return report, nil
}

func (l *lone) setup(ctx context.Context) error {
	if err := l.start(ctx); err != nil {
		return err
	}
	var err error
	l.dynamic, err = dynamic.NewForConfig(l.runtime.Config())
	return err
}

// repetition registers a Kyma with every module, starts an operator of
// its own, and measures until the Kyma is Ready and then gone.
func (l *lone) repetition(ctx context.Context, rep int) (loneSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("lone-%d", rep)
	syncNamespace := fmt.Sprintf("lone-runtime-%d", rep)
	name := fmt.Sprintf("lone-%d", rep)
	modules := loneModules(l.opts.Modules, rep)
	if err := remote.EnsureNamespace(ctx, l.client, ns); err != nil {
		return loneSample{}, err
	}
	if err := remote.EnsureNamespace(ctx, l.rtClient, syncNamespace); err != nil {
		return loneSample{}, err
	}
	if err := publishLoneModules(ctx, l.client, l.registry.Host(), ns, syncNamespace, modules); err != nil {
		return loneSample{}, err
	}
	spec := v1beta2.KymaSpec{Channel: benchChannel, SyncNamespace: syncNamespace}
	for _, m := range modules {
		spec.Modules = append(spec.Modules, v1beta2.Module{Name: m.name, Managed: true})
	}
	if err := createRuntimeKyma(ctx, l.client, ns, name, l.runtime.Kubeconfig(), spec); err != nil {
		return loneSample{}, err
	}
	states := (&kymaStates{changed: make(chan struct{})}).follow(ctx, l.client, ns, name)
	manifestsReady := followManifests(ctx, l.client, ns)
	stand := &loneStandIn{l: l, namespace: syncNamespace, modules: modules, hold: l.opts.MaxHold}
	standDone := stand.start(ctx)

	opCtx, stopOperator := context.WithCancel(ctx)
	defer stopOperator()
	started := time.Now()
	operatorDone, err := l.startOperator(opCtx, ns)
	if err != nil {
		return loneSample{}, err
	}
	defer func() {
		stopOperator()
		// The measurement is over; how the operator stopped does not change it.
		if err := <-operatorDone; err != nil {
			fmt.Fprintln(l.opts.Progress, "lone: stopping the operator:", err)
		}
	}()

	var lastReady time.Time
	err = poll(ctx, 5*time.Millisecond, func() (bool, error) {
		lastReady = stand.lastReady()
		return !lastReady.IsZero(), nil
	})
	var readyAt time.Time
	if err == nil {
		readyAt, err = states.readyAfter(ctx, lastReady)
	}
	if err != nil {
		return loneSample{}, fmt.Errorf("waiting for the Kyma to be Ready: %w (stand-in: %s)", err, stand.describe())
	}
	// The clock times let the operator's log be read against the figures.
	lastManifest := manifestsReady.last()
	fmt.Fprintf(l.opts.Progress, "repetition %d: each module %s\n", rep+1, stand.stepsTimeline(started))
	fmt.Fprintf(l.opts.Progress, "repetition %d: module CR Ready → its Manifest Ready: %s\n", rep+1, stand.delays(manifestsReady, name))
	fmt.Fprintf(l.opts.Progress, "repetition %d: operator started %s, last CR Ready %s, last Manifest Ready %s (%.3fs later), Kyma Ready %s (%.3fs later)\n", rep+1,
		started.UTC().Format(clockFormat), lastReady.UTC().Format(clockFormat), lastManifest.UTC().Format(clockFormat), lastManifest.Sub(lastReady).Seconds(),
		readyAt.UTC().Format(clockFormat), readyAt.Sub(lastManifest).Seconds())
	sample := loneSample{
		ready: readyAt.Sub(started), applied: stand.lastApplied().Sub(started), reaction: readyAt.Sub(lastReady),
		crAfterManager: stand.crAfterManager(),
	}
	for _, m := range modules {
		sample.objects += m.objects()
	}
	manifests := &v1beta2.ManifestList{}
	if err := l.client.List(ctx, manifests, client.InNamespace(ns)); err != nil {
		return sample, err
	}
	for _, m := range manifests.Items {
		sample.synced += len(m.Status.Synced)
	}
	present, err := presentObjects(ctx, l.dynamic, syncNamespace, modules)
	if err != nil {
		return sample, err
	}
	sample.inRuntime = len(present)
	deleteStart := time.Now()
	if err := l.client.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		return sample, err
	}
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		err := l.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1beta2.Kyma{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return sample, fmt.Errorf("waiting for the Kyma to be gone: %w", err)
	}
	sample.deleted = time.Since(deleteStart)
	if present, err = presentObjects(ctx, l.dynamic, syncNamespace, modules); err != nil {
		return sample, err
	}
	if sample.left = len(present); sample.left > 0 {
		fmt.Fprintf(l.opts.Progress, "repetition %d: left in the runtime, not being deleted, when the Kyma is gone: %v\n", rep+1, present)
	}
	cancel()
	<-standDone
	return sample, nil
}

// startOperator starts the operator in-process with its production
// settings, watcher off, for the Kymas in ns.
func (l *lone) startOperator(ctx context.Context, ns string) (<-chan error, error) {
	opts := operator.DefaultOptions()
	opts.Config = l.kcp.Config()
	opts.Namespace = ns
	opts.MetricsAddr, opts.HealthProbeAddr = "0", "0"
	opts.SharesProcess = true
	opts.Content.InsecureRegistries = []string{l.registry.Host()}
	if l.opts.MaxWorkersPerRuntime >= 0 {
		opts.MaxWorkersPerRuntime = l.opts.MaxWorkersPerRuntime
	}
	if l.opts.ProgressInterval >= 0 {
		opts.KymaProgressInterval = l.opts.ProgressInterval
	}
	if l.opts.RuntimeQPS > 0 {
		opts.RuntimeQPS = l.opts.RuntimeQPS
	}
	if l.opts.RuntimeBurst > 0 {
		opts.RuntimeBurst = l.opts.RuntimeBurst
	}
	if l.opts.RequeueProcessing >= 0 {
		opts.Intervals.Processing = l.opts.RequeueProcessing
	}
	mgr, err := operator.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the operator: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

// loneStandIn plays kube-controller-manager and the modules' operators in
// a runtime without controllers: as soon as a module's manager Deployment
// and default CR exist, it waits a random hold and makes the Deployment
// Available and the CR Ready, recording when. It learns of the objects
// through watches, as an operator would.
type loneStandIn struct {
	l         *lone
	namespace string
	modules   []loneModule
	hold      time.Duration

	mu       sync.Mutex
	managers map[string]bool
	steps    loneSteps
	crs      map[string]time.Time // when the CR was seen first
	ready    map[string]time.Time // when its Ready status was stored
	begun    map[string]bool
	errs     []error
}

// start runs the stand-in until ctx ends; the channel closes when it has.
func (s *loneStandIn) start(ctx context.Context) <-chan struct{} {
	s.managers, s.crs, s.ready, s.begun = map[string]bool{}, map[string]time.Time{}, map[string]time.Time{}, map[string]bool{}
	s.steps = loneSteps{crd: map[string]time.Time{}, established: map[string]time.Time{}, manager: map[string]time.Time{}}
	var wg sync.WaitGroup
	wg.Go(func() { s.watchCRDs(ctx) })
	wg.Go(func() {
		s.watch(ctx, func(ctx context.Context) (watch.Interface, error) {
			return s.l.dynamic.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace(s.namespace).Watch(ctx, metav1.ListOptions{})
		}, func(u *unstructured.Unstructured) {
			for _, m := range s.modules {
				if u.GetName() == m.manager() {
					s.seen(ctx, m, true)
				}
			}
		})
	})
	for _, m := range s.modules {
		wg.Go(func() {
			s.watch(ctx, func(ctx context.Context) (watch.Interface, error) {
				return s.l.dynamic.Resource(m.gvr()).Namespace(s.namespace).Watch(ctx, metav1.ListOptions{})
			}, func(u *unstructured.Unstructured) {
				if u.GetName() == loneCR {
					s.seen(ctx, m, false)
				}
			})
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// watch follows one resource until ctx ends, watching again when a watch
// ends or cannot start yet (a CRD not applied).
func (s *loneStandIn) watch(ctx context.Context, open func(context.Context) (watch.Interface, error), added func(*unstructured.Unstructured)) {
	for ctx.Err() == nil {
		w, err := open(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				added(u)
			}
		}
		w.Stop()
	}
}

// seen records that a module's manager (or CR) exists, and starts making
// the module ready once both do.
func (s *loneStandIn) seen(ctx context.Context, m loneModule, manager bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if manager {
		s.managers[m.name] = true
		if _, ok := s.steps.manager[m.name]; !ok {
			s.steps.manager[m.name] = time.Now()
		}
	} else if _, ok := s.crs[m.name]; !ok {
		s.crs[m.name] = time.Now()
	}
	_, cr := s.crs[m.name]
	if !s.managers[m.name] || !cr || s.begun[m.name] {
		return
	}
	s.begun[m.name] = true
	go func() {
		select {
		case <-time.After(time.Duration(rand.Int64N(int64(s.hold) + 1))):
		case <-ctx.Done():
			return
		}
		at, err := s.becomeReady(ctx, m)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s: %w", m.name, err))
			return
		}
		s.ready[m.name] = at
	}()
}

// becomeReady makes the manager Available and the CR Ready, and returns
// when the CR's status was stored.
func (s *loneStandIn) becomeReady(ctx context.Context, m loneModule) (time.Time, error) {
	deploy := &appsv1.Deployment{}
	if err := s.l.rtClient.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: m.manager()}, deploy); err != nil {
		return time.Time{}, err
	}
	now := metav1.Now()
	deploy.Status = appsv1.DeploymentStatus{
		ObservedGeneration: deploy.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	if err := s.l.rtClient.Status().Update(ctx, deploy); err != nil {
		return time.Time{}, fmt.Errorf("making the manager Available: %w", err)
	}
	cr, err := s.l.dynamic.Resource(m.gvr()).Namespace(s.namespace).Get(ctx, loneCR, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if err := unstructured.SetNestedField(cr.Object, string(v1beta2.StateReady), "status", "state"); err != nil {
		return time.Time{}, err
	}
	if _, err := s.l.dynamic.Resource(m.gvr()).Namespace(s.namespace).UpdateStatus(ctx, cr, metav1.UpdateOptions{}); err != nil {
		return time.Time{}, fmt.Errorf("making the CR Ready: %w", err)
	}
	return time.Now(), nil
}

// lastReady is when the last module's CR became Ready; zero until every
// module's has.
func (s *loneStandIn) lastReady() time.Time {
	return s.last(s.ready)
}

// lastApplied is when the last module's default CR was first seen; zero
// until every module's was.
func (s *loneStandIn) lastApplied() time.Time {
	return s.last(s.crs)
}

func (s *loneStandIn) last(times map[string]time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(times) < len(s.modules) {
		return time.Time{}
	}
	var last time.Time
	for _, t := range times {
		if t.After(last) {
			last = t
		}
	}
	return last
}

func (s *loneStandIn) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d of %d managers, %d CRs seen, %d Ready, errors %v", len(s.managers), len(s.modules), len(s.crs), len(s.ready), s.errs)
}

// manifestsReady is when each Manifest of a namespace was first seen Ready.
type manifestsReady struct {
	mu    sync.Mutex
	ready map[string]time.Time
}

// followManifests watches the Manifests of ns until ctx ends.
func followManifests(ctx context.Context, c client.WithWatch, ns string) *manifestsReady {
	m := &manifestsReady{ready: map[string]time.Time{}}
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &v1beta2.ManifestList{}, client.InNamespace(ns))
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if man, ok := ev.Object.(*v1beta2.Manifest); ok && man.Status.State == v1beta2.StateReady {
					m.mu.Lock()
					if _, seen := m.ready[man.Name]; !seen {
						m.ready[man.Name] = time.Now()
					}
					m.mu.Unlock()
				}
			}
			w.Stop()
		}
	}()
	return m
}

// last is when the last Manifest was first seen Ready.
func (m *manifestsReady) last() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var last time.Time
	for _, t := range m.ready {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// delays says, per module, how long after its CR became Ready its Manifest
// was seen Ready.
func (s *loneStandIn) delays(m *manifestsReady, kyma string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, mod := range s.modules {
		parts = append(parts, fmt.Sprintf("%s %.3fs", mod.name, m.ready[kyma+"-"+mod.name].Sub(s.ready[mod.name]).Seconds()))
	}
	return strings.Join(parts, ", ")
}

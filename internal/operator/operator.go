// Package operator wires the whole lifecycle manager — controllers, runtime
// clients, content fetching, metrics — from one Options struct. The binary,
// the dev environment, end-to-end tests and the benchmark all run this same
// code; there is no second copy of the wiring.
package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/analysis"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	backupcontroller "github.com/runtime-fleet/lifecycle-manager/internal/controller/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/catalog"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/rollout"
	takeovercontroller "github.com/runtime-fleet/lifecycle-manager/internal/controller/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/hibernation"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/intern"
	"github.com/runtime-fleet/lifecycle-manager/internal/maintenance"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

// Options configure the operator.
type Options struct {
	// Config reaches the control plane (KCP).
	Config *rest.Config

	// Namespace holds Kymas, the catalog, Manifests and runtime Secrets.
	Namespace string
	// SyncNamespace is the namespace the operator uses in each runtime.
	SyncNamespace string

	// MetricsAddr and HealthProbeAddr are listen addresses; "0" disables.
	MetricsAddr     string
	HealthProbeAddr string
	LeaderElection  bool
	// Pod is the process's own Pod (downward API POD_NAME, POD_NAMESPACE).
	// When set, the leader labels it (internal/leaderpod), so that the
	// listener's Service reaches the leader alone while standbys are ready
	// too. Empty outside a Pod: nothing is labelled.
	Pod types.NamespacedName

	Intervals               requeue.Intervals
	BaseBackoff, MaxBackoff time.Duration
	KymaConcurrency         int
	ManifestConcurrency     int

	// RuntimeQPS and RuntimeBurst limit each runtime client.
	RuntimeQPS   float32
	RuntimeBurst int

	// Content configures fetching and rendering module content.
	Content content.Options

	// KymaSelector limits the Kymas this operator manages (a label
	// selector); others are left completely alone. Empty selects all.
	KymaSelector string
	// Shard is the part of the fleet this process works on (--shards,
	// --shard-id): only the Kymas of its shard, with one leader per shard.
	// The zero value is the whole fleet.
	Shard shard.Shard
	// SharesProcess lets more than one operator run in this process (the
	// benchmark's shards): their controllers have the same names, which
	// controller-runtime otherwise refuses.
	SharesProcess bool
	// PauseSelector pauses every Kyma it matches, like the
	// skip-reconciliation label does for one. Empty pauses none.
	PauseSelector string
	// CatalogSync copies the module catalog into every runtime.
	CatalogSync bool
	// CatalogConcurrency is how many runtimes get the catalog at once.
	CatalogConcurrency int

	// Watcher configures the runtime watcher (SPEC R9); the zero value
	// disables it.
	Watcher WatcherOptions

	// RuntimeRequestTimeout bounds every request to a runtime.
	RuntimeRequestTimeout time.Duration
	// ReconcileTimeout bounds one reconcile of a Kyma, Manifest or catalog
	// copy; longer than RuntimeRequestTimeout, and than the 30 s that
	// server-side apply waits for new CRDs to be established.
	ReconcileTimeout time.Duration
	// MaxWorkersPerRuntime caps the reconciles working on one runtime API
	// server at once, across controllers and the Kymas registered against
	// it, so that a hanging runtime cannot hold every worker; zero means no
	// cap.
	MaxWorkersPerRuntime int
	// RuntimeIdleTimeout closes a runtime's connection when no reconcile
	// used it this long; what is known of the runtime stays (see
	// remote.Options.IdleTimeout). Zero keeps connections open.
	RuntimeIdleTimeout time.Duration
	// RolloutPoll is how often a moving ModuleRollout is looked at when
	// nothing it watches changes, and its content pins checked; zero means
	// rollout.DefaultPoll.
	RolloutPoll time.Duration
	// KymaProgressInterval is how often, at most, a Kyma's status is
	// written only to report that more of its modules became ready.
	KymaProgressInterval time.Duration
	// MaintenanceWindows, when set, holds upgrades to versions that require
	// downtime until each runtime's window (SPEC G2, --maintenance-windows).
	MaintenanceWindows *maintenance.Policy
	// UpgradePolicy says which Kymas' modules upgrade manually and the
	// deadline of a manual upgrade (--upgrade-policies,
	// --manual-upgrade-force-after); nil: modules upgrade automatically
	// unless their entry says Manual, with upgradepolicy.DefaultForceAfter.
	UpgradePolicy *upgradepolicy.Policy
	// HibernationSchedules, when set, pause runtimes while their schedule
	// says they sleep (SPEC G3, --hibernation-schedules).
	HibernationSchedules *hibernation.Schedules
	// Backup, when its Schedules are set, backs up runtimes (SPEC G5,
	// --backup-schedules).
	Backup BackupOptions
	// Clock tells the controllers the time of day (maintenance windows,
	// rollouts' soak); the real one when nil. Tests set a fake one.
	Clock clock.PassiveClock
	// OrphanedFinalizers is what happens to a module's own custom
	// resources that wait, being deleted, for finalizers while the
	// module's manager is gone (--orphaned-finalizers,
	// --orphaned-finalizers-after).
	OrphanedFinalizers manifest.OrphanedFinalizers
	// KLMTakeover says which Kymas this operator takes over, in place,
	// from the Kyma lifecycle-manager (--klm-takeover,
	// docs/migrating-from-klm.md); the zero value is off.
	KLMTakeover takeover.Policy
	// ModuleAccess configures the modules' own identities in runtimes
	// (SPEC R10): what a module that declares no RBAC is written as, and
	// the tokens of modules whose operator runs in the control plane.
	ModuleAccess manifest.AccessOptions
	// Analysis configures the rollouts' health gates (spec.analysis): the
	// Prometheus their queries go to, timeouts and concurrency.
	Analysis analysis.Options
}

// BackupOptions configure runtime backups.
type BackupOptions struct {
	// Schedules say which Kymas are backed up, when, where to and with
	// which key; nil takes no backups.
	Schedules *backup.Schedules
	// GracePeriod keeps a deleted Kyma's backups this long.
	GracePeriod time.Duration
	// Poll is the longest a RuntimeBackup waits between looks (tests with
	// a fake clock shorten it).
	Poll time.Duration
	// MaxConcurrency caps the backups taken at once; below it, a budget
	// from the runtimes due and the backups' duration decides.
	MaxConcurrency int
}

// DefaultOptions are the operator's defaults; flags override them.
func DefaultOptions() Options {
	return Options{
		Namespace:           "kcp-system",
		SyncNamespace:       v1beta2.DefaultRuntimeNamespace,
		MetricsAddr:         ":8080",
		HealthProbeAddr:     ":8081",
		Intervals:           requeue.DefaultIntervals(),
		BaseBackoff:         time.Second,
		MaxBackoff:          2 * time.Minute,
		KymaConcurrency:     8,
		ManifestConcurrency: 16,
		RuntimeQPS:          100,
		RuntimeBurst:        200,
		CatalogSync:         true,
		CatalogConcurrency:  4,
		Content:             content.DefaultOptions(),

		RuntimeRequestTimeout: 30 * time.Second,
		ReconcileTimeout:      3 * time.Minute,
		MaxWorkersPerRuntime:  4,
		RuntimeIdleTimeout:    time.Minute,
		KymaProgressInterval:  kyma.DefaultProgressInterval,
		ModuleAccess:          manifest.AccessOptions{Undeclared: manifest.UndeclaredAdmin, TokenTTL: time.Hour},
		Backup:                BackupOptions{GracePeriod: backupcontroller.DefaultGracePeriod, MaxConcurrency: backupcontroller.DefaultMaxConcurrency},
		Analysis:              analysis.DefaultOptions(),
	}
}

// NewScheme returns the scheme the operator works with.
func NewScheme() (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// Run starts the operator and blocks until ctx is done.
func Run(ctx context.Context, opts Options) error {
	mgr, err := New(ctx, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// New builds the operator's manager with every controller registered, ready
// to Start.
func New(ctx context.Context, opts Options) (ctrl.Manager, error) {
	if opts.Config == nil {
		return nil, errors.New("operator: no control-plane config")
	}
	if err := opts.ModuleAccess.Validate(); err != nil {
		return nil, err
	}
	if _, err := takeover.ParsePolicy(string(opts.KLMTakeover)); err != nil {
		return nil, err
	}
	if err := opts.OrphanedFinalizers.Validate(); err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	if err := opts.Shard.Validate(); err != nil {
		return nil, err
	}
	selection, err := labels.Parse(opts.KymaSelector)
	if err != nil {
		return nil, fmt.Errorf("parsing the Kyma selector %q: %w", opts.KymaSelector, err)
	}
	pauseGroup, err := labels.Parse(opts.PauseSelector)
	if err != nil {
		return nil, fmt.Errorf("parsing the pause selector %q: %w", opts.PauseSelector, err)
	}
	paused := pause.Policy{Group: pauseGroup, Hibernation: opts.HibernationSchedules, Clock: opts.Clock}
	mgr, err := newManager(opts, scheme, selection)
	if err != nil {
		return nil, err
	}
	// A Kyma's Manifests and kubeconfig Secret are found by index, once
	// registered for every controller and the runtime cache.
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	// Files the shard's Kymas, Manifests and Secrets under their bucket,
	// and reports what the cache holds.
	if err := opts.Shard.Setup(ctx, mgr); err != nil {
		return nil, fmt.Errorf("setting up the shard: %w", err)
	}

	// The API reader confirms a missing kubeconfig Secret past the cache.
	runtimes := remote.NewCache(mgr.GetClient(), mgr.GetAPIReader(), remote.Options{
		Scheme: scheme, QPS: opts.RuntimeQPS, Burst: opts.RuntimeBurst, Namespace: opts.Namespace,
		RequestTimeout: opts.RuntimeRequestTimeout, MaxWorkersPerRuntime: opts.MaxWorkersPerRuntime,
		IdleTimeout: opts.RuntimeIdleTimeout,
		Indexed:     true,
	})
	// A runtime nobody competes with may use every idle worker of these
	// controllers beyond its cap (remote.Slots).
	runtimes.Workers("kyma", opts.KymaConcurrency)
	runtimes.Workers("manifest", opts.ManifestConcurrency)
	var keychain authn.Keychain
	if opts.Content.RegistryCredentialsSecret != "" {
		keychain = fetch.NewSecretKeychain(mgr.GetClient(), client.ObjectKey{Namespace: opts.Namespace, Name: opts.Content.RegistryCredentialsSecret})
	}
	pipeline, err := content.New(opts.Content, keychain)
	if err != nil {
		return nil, err
	}

	if err := setupReadiness(mgr, opts); err != nil {
		return nil, err
	}
	watcherSources, err := setupWatcher(ctx, mgr, opts, runtimes, paused)
	if err != nil {
		return nil, fmt.Errorf("setting up the runtime watcher: %w", err)
	}
	if err := setupControllers(ctx, mgr, opts, controllerParts{
		runtimes: runtimes, pipeline: pipeline, paused: paused, sources: watcherSources, keychain: keychain,
	}); err != nil {
		return nil, err
	}
	// Every process, planner or not, reports how fresh the rollouts' plans
	// are: a planner that does not run cannot say so itself.
	metrics.ReportRolloutPlans(ctx, mgr.GetCache(), opts.Namespace)
	return mgr, nil
}

// leaseName is the leader-election Lease of an unsharded operator; each
// shard has one of its own (shard.LeaseName).
const leaseName = "lifecycle-manager.operator.kyma-project.io"

// newManager creates the manager: its cache holds the KCP namespace only,
// without managedFields, and only the Kymas of the selection and the shard
// (with their Manifests and Secrets; the shard's by a label selector).
func newManager(opts Options, scheme *k8sruntime.Scheme, selection labels.Selector) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(opts.Config, ctrl.Options{
		Scheme:                  scheme,
		MapperProvider:          newControlPlaneMapper,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.HealthProbeAddr,
		NewCache:                opts.Shard.NewCache(cache.New),
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        opts.Shard.LeaseName(leaseName),
		LeaderElectionNamespace: opts.Namespace,
		// A stopping leader (a rolling update, a drain) gives the Lease up
		// instead of letting it run out: a standby takes over within its
		// retry period rather than the Lease's 15 s. Safe because the
		// Lease is released only after every runnable has stopped, and
		// nothing of the operator runs once the manager has returned.
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			// managedFields are large and never read by the operator; the
			// strings that repeat across the fleet's objects are kept once
			// (internal/intern).
			DefaultTransform: intern.CacheTransform(intern.NewTable(intern.DefaultMaxEntries, intern.DefaultMaxLength)),
			// Kymas outside the selection are invisible: no finalizer, no
			// status write, nothing done for their runtimes.
			// With shards, each shard's informers list and watch its
			// share only (shard.Shard.Selector).
			ByObject: opts.Shard.ByObject(selection),
		},
		// The controllers' order (internal/priority) needs the priority
		// queue: controller-runtime's default, set here so that a change of
		// that default cannot undo it.
		Controller: config.Controller{UsePriorityQueue: ptr.To(true), SkipNameValidation: ptr.To(opts.SharesProcess)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := reportLeadership(mgr, opts.Shard.ID); err != nil {
		return nil, err
	}

	return mgr, nil
}

// controllerParts are what the controllers share.
type controllerParts struct {
	runtimes *remote.Cache
	pipeline *content.Pipeline
	paused   pause.Policy
	sources  watcherSources
	keychain authn.Keychain
}

// setupControllers registers the Kyma, Manifest and (optionally) catalog
// controllers with mgr.
func setupControllers(ctx context.Context, mgr ctrl.Manager, opts Options, p controllerParts) error {
	runtimes, pipeline, paused, watcherSources := p.runtimes, p.pipeline, p.paused, p.sources
	// Templates published for KLM: from their embedded descriptor, or from
	// --oci-registry-host, naming the component by the module's
	// ModuleReleaseMeta as KLM does.
	descriptors := pipeline.Descriptors(ocm.ReleaseMetaComponents{Reader: mgr.GetClient()})
	if err := (&kyma.Reconciler{
		Client:        mgr.GetClient(),
		Takeover:      opts.KLMTakeover,
		Runtimes:      runtimes,
		Pinner:        pipeline,
		Descriptors:   descriptors,
		Recorder:      mgr.GetEventRecorder("lifecycle-manager"),
		Intervals:     opts.Intervals,
		SyncNamespace: opts.SyncNamespace,
		Pause:         paused,

		ReconcileTimeout: opts.ReconcileTimeout,
		ProgressInterval: opts.KymaProgressInterval,
		// Every shard holds modules under a ModuleRollout until the
		// rollout's plan lets their Kyma move: with no planner running,
		// a rollout holds (fails closed) rather than moving the fleet at once.
		Rollouts:      true,
		Maintenance:   opts.MaintenanceWindows,
		UpgradePolicy: opts.UpgradePolicy,
		Clock:         opts.Clock,

		Reporting:           watcherSources.KymaReporting,
		Liveness:            watcherSources.Liveness,
		ReportedReadyFactor: watcherSources.ReportedReadyFactor,
	}).SetupWithManager(ctx, mgr, kyma.SetupOptions{
		Namespace:               opts.Namespace,
		MaxConcurrentReconciles: opts.KymaConcurrency,
		BaseBackoff:             opts.BaseBackoff,
		MaxBackoff:              opts.MaxBackoff,
		Sources:                 watcherSources.Kymas,
	}); err != nil {
		return fmt.Errorf("setting up the Kyma controller: %w", err)
	}
	if err := (&manifest.Reconciler{
		Client:        mgr.GetClient(),
		Runtimes:      runtimes,
		Renderer:      pipeline,
		Recorder:      mgr.GetEventRecorder("lifecycle-manager"),
		Intervals:     opts.Intervals,
		SyncNamespace: opts.SyncNamespace,
		Pause:         paused,

		ReconcileTimeout:    opts.ReconcileTimeout,
		Reporting:           watcherSources.Reporting,
		ReportedReadyFactor: watcherSources.ReportedReadyFactor,
		Access:              opts.ModuleAccess,
		Orphans:             opts.OrphanedFinalizers,
		Takeover:            opts.KLMTakeover,
		Clock:               opts.Clock,
	}).SetupWithManager(mgr, manifest.SetupOptions{
		MaxConcurrentReconciles: opts.ManifestConcurrency,
		BaseBackoff:             opts.BaseBackoff,
		MaxBackoff:              opts.MaxBackoff,
		Reports:                 watcherSources.Manifests,
	}); err != nil {
		return fmt.Errorf("setting up the Manifest controller: %w", err)
	}
	if opts.Shard.Plans() {
		// One planner for the whole fleet: the only process, or the leader
		// of shard 0, which reads every shard's Kymas and Manifests through
		// a cache of its own (a shard's cache sees its part of the fleet
		// only). It writes nothing but the rollouts' status; each shard's
		// Kyma controller obeys it.
		planner := &rollout.Reconciler{
			Client: mgr.GetClient(), Namespace: opts.Namespace, Clock: opts.Clock,
			Content:       content.Templates{Pinner: pipeline, Descriptors: descriptors},
			Pause:         paused,
			Maintenance:   opts.MaintenanceWindows,
			UpgradePolicy: opts.UpgradePolicy,
			Poll:          opts.RolloutPoll,
		}
		var fleet cache.Cache
		var manifests client.Reader = mgr.GetClient()
		if opts.Shard.Enabled() {
			var err error
			if fleet, err = rollout.NewFleetCache(ctx, mgr, opts.Namespace); err != nil {
				return fmt.Errorf("setting up the rollout planner's cache: %w", err)
			}
			manifests = fleet
		}
		// The analyses read runtimes through the controllers' clients:
		// a runtime of another shard is found past the shard's cache
		// (remote.Cache asks the API server for its Secret).
		analyzer, err := analysis.New(opts.Analysis, analysis.Fleet{
			Manifests: manifests, Runtimes: runtimes, Namespace: opts.Namespace, SyncNamespace: opts.SyncNamespace,
		})
		if err != nil {
			return fmt.Errorf("setting up the rollouts' analyses: %w", err)
		}
		planner.Analyzer = analyzer
		if err := planner.SetupWithManager(mgr, fleet); err != nil {
			return fmt.Errorf("setting up the rollout controller: %w", err)
		}
	}
	if opts.Backup.Schedules != nil {
		// Backups go to registries as content comes from them: the same
		// insecure hosts and credentials.
		if err := (&backupcontroller.Reconciler{
			Client:           mgr.GetClient(),
			APIReader:        mgr.GetAPIReader(),
			Runtimes:         runtimes,
			Schedules:        opts.Backup.Schedules,
			Store:            backup.StoreOptions{InsecureRegistries: opts.Content.InsecureRegistries, Keychain: p.keychain},
			Namespace:        opts.Namespace,
			SyncNamespace:    opts.SyncNamespace,
			GracePeriod:      opts.Backup.GracePeriod,
			Clock:            opts.Clock,
			Poll:             opts.Backup.Poll,
			ReconcileTimeout: opts.ReconcileTimeout,
			Events:           reconciler.NewEvents(mgr.GetEventRecorder("lifecycle-manager")),
		}).SetupWithManager(mgr, opts.Backup.MaxConcurrency); err != nil {
			return fmt.Errorf("setting up the backup controller: %w", err)
		}
	}
	if opts.KLMTakeover != "" && opts.KLMTakeover != takeover.Off {
		if err := (&takeovercontroller.Leftovers{Client: mgr.GetClient(), Namespace: opts.Namespace}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if opts.CatalogSync {
		if err := (&catalog.Reconciler{
			Client:        mgr.GetClient(),
			Runtimes:      runtimes,
			ControlPlane:  opts.Config,
			Namespace:     opts.Namespace,
			SyncNamespace: opts.SyncNamespace,
			Resync:        opts.Intervals.Ready,
			Pause:         paused,

			ReconcileTimeout: opts.ReconcileTimeout,
		}).SetupWithManager(mgr, opts.CatalogConcurrency); err != nil {
			return fmt.Errorf("setting up the catalog sync: %w", err)
		}
	}
	return nil
}

// Command lifecycle-manager runs the operator in the control plane.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/console/incluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/hibernation"
	"github.com/runtime-fleet/lifecycle-manager/internal/maintenance"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
	"github.com/runtime-fleet/lifecycle-manager/internal/version"
)

func main() {
	// Helm charts render in child processes of this binary; in one of
	// them, this renders and exits.
	render.ServeIfRenderProcess()
	// The in-cluster console is a mode of this binary, so that it ships in
	// the same image (docs/architecture.md, "The console"); it runs in a
	// Deployment of its own, under a ServiceAccount of its own.
	if len(os.Args) > 1 && os.Args[1] == "console" {
		os.Exit(runConsole(os.Args[2:]))
	}
	opts := operator.DefaultOptions()
	var maintenanceWindows, hibernationSchedules, backupSchedules, upgradePolicies string
	forceAfter := upgradepolicy.DefaultForceAfter
	zapOpts := zap.Options{}

	flag.StringVar(&opts.Namespace, "namespace", opts.Namespace, "Control-plane namespace of Kymas, the module catalog, Manifests and runtime kubeconfig Secrets.")
	flag.StringVar(&opts.SyncNamespace, "sync-namespace", opts.SyncNamespace, "Namespace the operator uses in each runtime.")
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", opts.MetricsAddr, "Address of the metrics endpoint; 0 disables it.")
	flag.StringVar(&opts.HealthProbeAddr, "health-probe-bind-address", opts.HealthProbeAddr, "Address of the health probes; 0 disables them.")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", opts.LeaderElection, "Elect a leader so that only one replica reconciles.")
	flag.StringVar(&opts.Pod.Name, "pod-name", os.Getenv("POD_NAME"), "Name of this process's Pod (default $POD_NAME, the downward API): the leader labels it, and the listener's Service selects that label. Empty labels nothing.")
	flag.StringVar(&opts.Pod.Namespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of this process's Pod (default $POD_NAMESPACE); must be --namespace.")
	flag.IntVar(&opts.Shard.Count, "shards", 1, "Split the fleet into this many shards by a stable hash of each Kyma's name; each shard is run by its own processes, one leader per shard (docs/install.md, \"High availability and sharding\").")
	flag.IntVar(&opts.Shard.ID, "shard-id", 0, "The shard this process works on, 0 to --shards minus 1; Kymas of other shards, their Manifests and Secrets are never touched.")
	flag.DurationVar(&opts.Intervals.Ready, "requeue-ready", opts.Intervals.Ready, "How often a Ready object is checked for drift.")
	flag.DurationVar(&opts.Intervals.Processing, "requeue-processing", opts.Intervals.Processing, "How soon an object on its way to Ready is looked at again.")
	flag.DurationVar(&opts.Intervals.Error, "requeue-error", opts.Intervals.Error, "How soon an object in Error is looked at again.")
	flag.DurationVar(&opts.Intervals.Warning, "requeue-warning", opts.Intervals.Warning, "How soon an object in Warning is looked at again.")
	flag.Float64Var(&opts.Intervals.Jitter, "requeue-jitter", opts.Intervals.Jitter, "Random fraction by which requeue intervals are lengthened.")
	flag.DurationVar(&opts.BaseBackoff, "backoff-base", opts.BaseBackoff, "First retry delay after an error.")
	flag.DurationVar(&opts.MaxBackoff, "backoff-max", opts.MaxBackoff, "Longest retry delay after repeated errors.")
	flag.IntVar(&opts.KymaConcurrency, "kyma-concurrency", opts.KymaConcurrency, "Kymas reconciled at once.")
	flag.IntVar(&opts.ManifestConcurrency, "manifest-concurrency", opts.ManifestConcurrency, "Manifests reconciled at once.")
	flag.StringVar(&opts.Content.CacheDir, "content-cache-dir", opts.Content.CacheDir, "Directory that keeps fetched module content across restarts.")
	flag.StringVar(&opts.KymaSelector, "kyma-selector", opts.KymaSelector, "Label selector of the Kymas this operator manages; others are left alone. Empty selects all.")
	flag.StringVar(&opts.PauseSelector, "pause-selector", opts.PauseSelector, "Label selector of Kymas to pause, like the skip-reconciliation label. Empty pauses none.")
	flag.BoolVar(&opts.CatalogSync, "catalog-sync", opts.CatalogSync, "Copy the module catalog into every runtime.")
	flag.DurationVar(&opts.RuntimeRequestTimeout, "runtime-request-timeout", opts.RuntimeRequestTimeout, "Longest wait for one request to a runtime's API server; 0 waits forever.")
	flag.DurationVar(&opts.ReconcileTimeout, "reconcile-timeout", opts.ReconcileTimeout, "Longest run of one Kyma, Manifest, catalog or watcher-agent reconcile; 0 means none.")
	flag.DurationVar(&opts.RolloutPoll, "rollout-poll", opts.RolloutPoll, "How often a moving ModuleRollout is looked at when nothing it watches changes, its plannedAt refreshed and its pinned content links resolved again to see whether a tag moved. 0 means 30s.")
	flag.DurationVar(&opts.KymaProgressInterval, "kyma-progress-interval", opts.KymaProgressInterval, "How often, at most, a Kyma's status is written only to report that more of its modules became ready; changes of state, errors and module list changes are written at once.")
	flag.DurationVar(&opts.RuntimeIdleTimeout, "runtime-idle-timeout", opts.RuntimeIdleTimeout, "Close a runtime's connection when no reconcile used it this long (a Ready runtime is looked at once per Ready interval); what is known of the runtime stays. 0 keeps connections open.")
	runtimeQPS := float64(opts.RuntimeQPS)
	flag.Float64Var(&runtimeQPS, "runtime-qps", runtimeQPS, "Requests per second each runtime's client sends at most, after a burst of --runtime-burst.")
	flag.IntVar(&opts.RuntimeBurst, "runtime-burst", opts.RuntimeBurst, "Requests each runtime's client may send at once before --runtime-qps applies.")
	flag.IntVar(&opts.MaxWorkersPerRuntime, "max-workers-per-runtime", opts.MaxWorkersPerRuntime, "Reconciles working on one runtime API server at once (the server of the Kyma's kubeconfig), across controllers and Kymas; others requeue. 0 means no cap.")
	flag.StringVar(&opts.ModuleAccess.Undeclared, "undeclared-module-access", opts.ModuleAccess.Undeclared,
		"What a module whose ModuleTemplate declares no RBAC (spec.rbac) is written as: admin (the runtime's kubeconfig, as every module published for the Kyma API needs) or refuse (its Manifest shows Error). Modules that declare RBAC always get an identity of their own.")
	flag.DurationVar(&opts.ModuleAccess.TokenTTL, "module-token-ttl", opts.ModuleAccess.TokenTTL, "Lifetime of the token in the kubeconfig Secret of a module whose operator runs in the control plane; at least 10m.")
	flag.DurationVar(&opts.ModuleAccess.TokenRenewBefore, "module-token-renew-before", opts.ModuleAccess.TokenRenewBefore, "How long before it expires a module's token is renewed; 0 means halfway through its life.")
	flag.Var((*orphanPolicyFlag)(&opts.OrphanedFinalizers.Policy), "orphaned-finalizers",
		"What happens to a module's own custom resources that wait, being deleted, for finalizers while the module's manager is gone (docs/modules.md): wait (keep waiting; the status says so) or remove (remove the module's own finalizers from them after --orphaned-finalizers-after).")
	flag.DurationVar(&opts.OrphanedFinalizers.After, "orphaned-finalizers-after", manifest.DefaultOrphanedFinalizersAfter,
		"How long such a custom resource waits before --orphaned-finalizers=remove acts, from the later of its deletion and the moment the operator saw the manager gone.")
	flag.Var((*takeoverFlag)(&opts.KLMTakeover), "klm-takeover",
		"Which Kymas the operator takes over, in place, from the Kyma lifecycle-manager (docs/migrating-from-klm.md): off, labelled (Kymas labelled operator.kyma-project.io/klm-takeover=true) or all.")
	flag.StringVar(&maintenanceWindows, "maintenance-windows", "",
		"YAML file of weekly maintenance windows per label group of Kymas (docs/rollouts.md); upgrades to versions that require downtime wait for a runtime's window. Empty: they run at once.")
	flag.StringVar(&upgradePolicies, "upgrade-policies", "",
		"YAML file of upgrade policies per label group of Kymas (docs/rollouts.md): whether modules that set no upgrade mode upgrade at once (Automatic) or wait for the runtime owner's approval (Manual), and forceAfter, how long a manual upgrade waits before it is installed without approval. Empty: Automatic.")
	flag.DurationVar(&forceAfter, "manual-upgrade-force-after", forceAfter,
		"How long a manual upgrade (upgrade: Manual) waits for the runtime owner's approval before it is installed without it, for Kymas that no --upgrade-policies entry matches; more than 0.")
	flag.StringVar(&hibernationSchedules, "hibernation-schedules", "",
		"YAML file of cron schedules per label group of Kymas that put runtimes to sleep and wake them (docs/operations.md); a sleeping runtime is paused. Empty: none.")
	flag.StringVar(&backupSchedules, "backup-schedules", "",
		"YAML file of backup schedules per label group of Kymas: cron, time zone, retention, OCI repository and key Secret (docs/operations.md, \"Backups and restore\"). Empty: no backups.")
	flag.DurationVar(&opts.Backup.GracePeriod, "backup-grace-period", opts.Backup.GracePeriod, "How long a deleted Kyma's backups are kept before they and its RuntimeBackup are deleted.")
	flag.IntVar(&opts.Backup.MaxConcurrency, "backup-max-concurrency", opts.Backup.MaxConcurrency,
		"Most backups taken at once by this process; below it, as many as twice the rate of backups falling due times their measured duration (docs/operations.md, \"Backups and restore\").")
	opts.Content.BindFlags(flag.CommandLine)
	flag.StringVar(&opts.Content.RegistryCredentialsSecret, "registry-credentials-secret", opts.Content.RegistryCredentialsSecret,
		"Name of a kubernetes.io/dockerconfigjson Secret in --namespace with credentials for OCI registries, read live; empty reads registries anonymously.")
	opts.Watcher.BindFlags(flag.CommandLine)
	opts.Analysis.BindFlags(flag.CommandLine)
	zapOpts.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	opts.RuntimeQPS = float32(runtimeQPS)
	if *showVersion {
		version.Print(os.Stdout, "lifecycle-manager")
		return
	}

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if maintenanceWindows != "" {
		policy, err := maintenance.Load(maintenanceWindows)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		opts.MaintenanceWindows = policy
	}
	upgrades, err := upgradepolicy.New(upgradePolicies, forceAfter)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts.UpgradePolicy = upgrades
	if hibernationSchedules != "" {
		schedules, err := hibernation.Load(hibernationSchedules)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		opts.HibernationSchedules = schedules
	}
	if backupSchedules != "" {
		schedules, err := backup.Load(backupSchedules)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		opts.Backup.Schedules = schedules
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading kubeconfig:", err)
		os.Exit(1)
	}
	opts.Config = cfg
	if err := operator.Run(ctrl.SetupSignalHandler(), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// runConsole runs `lifecycle-manager console [flags]` and returns the exit
// code.
func runConsole(args []string) int {
	fs := flag.NewFlagSet("lifecycle-manager console", flag.ContinueOnError)
	var opts incluster.Options
	opts.BindFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig to reach the API server with (default: in-cluster, then $KUBECONFIG).")
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		version.Print(os.Stdout, "lifecycle-manager")
		return 0
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	var cfg *rest.Config
	var err error
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading kubeconfig:", err)
		return 1
	}
	opts.Config = cfg
	if err := incluster.Run(ctrl.SetupSignalHandler(), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// takeoverFlag is --klm-takeover.
type takeoverFlag takeover.Policy

func (f *takeoverFlag) String() string {
	if *f == "" {
		return string(takeover.Off)
	}
	return string(*f)
}

func (f *takeoverFlag) Set(value string) error {
	p, err := takeover.ParsePolicy(value)
	*f = takeoverFlag(p)
	return err
}

// orphanPolicyFlag is --orphaned-finalizers; Options.Validate checks it.
type orphanPolicyFlag manifest.OrphanPolicy

func (f *orphanPolicyFlag) String() string {
	if *f == "" {
		return string(manifest.OrphansWait)
	}
	return string(*f)
}

func (f *orphanPolicyFlag) Set(value string) error {
	*f = orphanPolicyFlag(value)
	return manifest.OrphanedFinalizers{Policy: manifest.OrphanPolicy(value)}.Validate()
}

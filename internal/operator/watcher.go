package operator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
	"github.com/runtime-fleet/lifecycle-manager/internal/version"
	watcherctrl "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// WatcherOptions configure the runtime watcher (SPEC R9): the listener, the
// PKI and the agents in runtimes. The zero value disables the watcher, so
// that DefaultOptions and the tests of other features run without it; the
// binary's flags (BindFlags) enable it.
type WatcherOptions struct {
	// ListenerAddress is the listener's HTTPS address; "" or "0" disables the
	// watcher altogether.
	ListenerAddress string
	// ListenerURL is how agents in runtimes reach the listener; by default
	// https://<first of ListenerNames>:<port of ListenerAddress>.
	ListenerURL string
	// ListenerNames are the DNS names and IPs of the listener's serving
	// certificate.
	ListenerNames []string

	// PKINamespace holds the CA and the runtimes' credentials; only the
	// operator should be able to read it (docs/watcher.md).
	PKINamespace string
	// CASecret names the CA's Secret in PKINamespace.
	CASecret string
	// CAValidity is the lifetime of a newly created CA.
	CAValidity time.Duration
	// CertValidity is the lifetime of runtime and listener certificates.
	CertValidity time.Duration
	// RenewFraction renews a certificate when less than this fraction of its
	// lifetime is left.
	RenewFraction float64

	// AgentImage is the runtime-watcher image rendered into runtimes.
	AgentImage string
	// LocalAgentURL, when set and returning a URL for a Kyma, says that the
	// Kyma's agent runs outside its runtime at that base URL (tests, the dev
	// environment): the runtime's webhook calls it there.
	LocalAgentURL func(*v1beta2.Kyma) string

	// NoDefaultWatcher stops the default Watcher from being created at start
	// when absent.
	NoDefaultWatcher bool
	// NoModuleResources leaves module resources out of what agents report:
	// a module's readiness and drift are then found by the Manifest's
	// periodic reconcile only.
	NoModuleResources bool
	// PausedSelector is a label selector of Kymas whose reporting is paused,
	// in addition to the watcher-paused label.
	PausedSelector string

	// SilenceTimeout is how long without a report or heartbeat makes a
	// runtime silent; FallbackInterval is how often silent runtimes' Kymas
	// are then requeued.
	SilenceTimeout   time.Duration
	FallbackInterval time.Duration
	// RecheckAfter requeues a reported Kyma once more this long after the
	// report, in case its first reconcile read the runtime just before the
	// change was stored; negative disables it.
	RecheckAfter time.Duration
	// Resync is how often each runtime's agent resources are checked.
	Resync time.Duration
	// Concurrency is how many runtimes' agents are reconciled at once.
	Concurrency int

	// ReportRate is how many requests (reports and heartbeats) per second
	// the listener takes from one runtime id, ReportBurst how many at once;
	// more are answered 429 with Retry-After. A runtime's client key is
	// readable inside the runtime, so without it one runtime could flood the
	// listener. A negative ReportRate disables the limit. Zero takes the
	// default, like every zero field (withDefaults): the flag refuses 0
	// (reportRateFlag), so that no one reads it as "no limit" or "none".
	ReportRate  float64
	ReportBurst int

	// ReportedReadyFactor stretches the drift check of a Ready Manifest to
	// this many Ready intervals while the watcher reports every change to
	// the module's objects (a healthy agent and Watchers selecting each of
	// their resources); 1 or less keeps the Ready interval.
	ReportedReadyFactor int
}

// DefaultWatcherOptions are the watcher's defaults when it is enabled.
func DefaultWatcherOptions() WatcherOptions {
	return WatcherOptions{
		ListenerAddress:  ":8443",
		PKINamespace:     "lifecycle-manager-pki",
		CASecret:         "watcher-ca",
		CAValidity:       10 * 365 * 24 * time.Hour,
		CertValidity:     30 * 24 * time.Hour,
		RenewFraction:    pki.DefaultRenewFraction,
		AgentImage:       defaultAgentImage(),
		SilenceTimeout:   90 * time.Second,
		FallbackInterval: time.Minute,
		RecheckAfter:     500 * time.Millisecond,
		Resync:           10 * time.Minute,
		Concurrency:      4,
		ReportRate:       50,
		ReportBurst:      200,

		ReportedReadyFactor: 6,
	}
}

// BindFlags registers the watcher's flags with their defaults.
func (o *WatcherOptions) BindFlags(fs *flag.FlagSet) {
	*o = DefaultWatcherOptions()
	fs.StringVar(&o.ListenerAddress, "listener-address", o.ListenerAddress, "HTTPS address of the runtime watcher's listener; 0 disables the runtime watcher.")
	fs.StringVar(&o.ListenerURL, "listener-url", o.ListenerURL, "URL agents in runtimes reach the listener at (default https://<first listener name>:<port>).")
	fs.Func("listener-names", "Comma-separated DNS names and IPs of the listener's certificate (default lifecycle-manager-listener.<namespace>.svc).", func(s string) error {
		o.ListenerNames = strings.Split(s, ",")
		return nil
	})
	fs.StringVar(&o.PKINamespace, "watcher-pki-namespace", o.PKINamespace, "Protected namespace of the watcher CA and the runtimes' certificates.")
	fs.StringVar(&o.CASecret, "watcher-ca-secret", o.CASecret, "Name of the watcher CA's Secret.")
	fs.DurationVar(&o.CAValidity, "watcher-ca-validity", o.CAValidity, "Lifetime of a newly created watcher CA.")
	fs.DurationVar(&o.CertValidity, "watcher-cert-validity", o.CertValidity, "Lifetime of runtime and listener certificates.")
	fs.Float64Var(&o.RenewFraction, "watcher-cert-renew-fraction", o.RenewFraction, "Renew a certificate when less than this fraction of its lifetime is left.")
	fs.StringVar(&o.AgentImage, "watcher-agent-image", o.AgentImage, "runtime-watcher image installed into runtimes.")
	fs.BoolVar(&o.NoDefaultWatcher, "watcher-no-default", o.NoDefaultWatcher, "Do not create the default Watcher (runtime Kymas' spec) at start when absent.")
	fs.BoolVar(&o.NoModuleResources, "watcher-no-module-resources", o.NoModuleResources, "Do not report changes of module resources (their spec, deletion and status) from runtimes; a module's readiness and drift then wait for the Manifest's periodic reconcile.")
	fs.StringVar(&o.PausedSelector, "watcher-paused-selector", o.PausedSelector, "Label selector of Kymas whose runtime reporting is paused.")
	fs.DurationVar(&o.SilenceTimeout, "watcher-silence-timeout", o.SilenceTimeout, "Time without reports or heartbeats after which a runtime's Kyma is reconciled every --watcher-fallback-interval.")
	fs.DurationVar(&o.FallbackInterval, "watcher-fallback-interval", o.FallbackInterval, "Requeue interval of Kymas whose runtime went silent.")
	fs.DurationVar(&o.RecheckAfter, "listener-recheck-after", o.RecheckAfter, "Requeue a reported Kyma once more this long after the report (the first reconcile may read the runtime just before the change is stored); negative disables.")
	fs.DurationVar(&o.Resync, "watcher-resync", o.Resync, "How often each runtime's agent resources are checked for drift.")
	fs.Var((*reportRateFlag)(&o.ReportRate), "listener-report-rate", "Requests (reports and heartbeats) per second the listener takes from one runtime; more are answered 429 with Retry-After. Negative disables the limit; 0 is refused.")
	fs.Var((*reportBurstFlag)(&o.ReportBurst), "listener-report-burst", "Requests the listener takes from one runtime at once, above --listener-report-rate; at least 1.")
	fs.IntVar(&o.ReportedReadyFactor, "watcher-reported-ready-factor", o.ReportedReadyFactor, "Check a Ready module for drift every this many --requeue-ready intervals while the watcher reports every change to its objects; 1 checks at every interval.")
}

// reportRateFlag is --listener-report-rate. A positive rate limits each
// runtime, a negative one turns the limit off. 0 is refused: as a token
// bucket it would take a runtime's first burst of requests and none ever
// after, and read as "no limit" it would contradict the help; either way a
// typo would pass silently.
type reportRateFlag float64

func (f *reportRateFlag) String() string { return strconv.FormatFloat(float64(*f), 'g', -1, 64) }

func (f *reportRateFlag) Set(s string) error {
	rate, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(rate) || math.IsInf(rate, 0):
		return errors.New("not a number of requests per second")
	case rate == 0:
		return errors.New("0 is refused: give a positive rate, or a negative one to disable the limit")
	}
	*f = reportRateFlag(rate)
	return nil
}

// reportBurstFlag is --listener-report-burst: at least 1, since a bucket
// that holds no token refuses every request.
type reportBurstFlag int

func (f *reportBurstFlag) String() string { return strconv.Itoa(int(*f)) }

func (f *reportBurstFlag) Set(s string) error {
	burst, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return errors.New("not a whole number of requests")
	case burst < 1:
		return errors.New("must be at least 1: a runtime whose bucket holds no token is never heard")
	}
	*f = reportBurstFlag(burst)
	return nil
}

func (o WatcherOptions) enabled() bool {
	return o.ListenerAddress != "" && o.ListenerAddress != "0"
}

// withDefaults fills zero fields from DefaultWatcherOptions, so that callers
// (tests, dev environment) set only what they change. Each shard has a
// listener Service of its own (the runtimes of its Kymas report to it), so
// the default name carries the shard.
func (o WatcherOptions) withDefaults(namespace string, s shard.Shard) WatcherOptions {
	d := DefaultWatcherOptions()
	setDefault(&o.PKINamespace, d.PKINamespace)
	setDefault(&o.CASecret, d.CASecret)
	setDefault(&o.CAValidity, d.CAValidity)
	setDefault(&o.CertValidity, d.CertValidity)
	setDefault(&o.RenewFraction, d.RenewFraction)
	setDefault(&o.AgentImage, d.AgentImage)
	setDefault(&o.SilenceTimeout, d.SilenceTimeout)
	setDefault(&o.FallbackInterval, d.FallbackInterval)
	setDefault(&o.RecheckAfter, d.RecheckAfter)
	setDefault(&o.Resync, d.Resync)
	setDefault(&o.Concurrency, d.Concurrency)
	setDefault(&o.ReportRate, d.ReportRate)
	setDefault(&o.ReportBurst, d.ReportBurst)
	setDefault(&o.ReportedReadyFactor, d.ReportedReadyFactor)
	if len(o.ListenerNames) == 0 {
		o.ListenerNames = []string{listenerService(s) + "." + namespace + ".svc", "localhost", "127.0.0.1"}
	}
	if o.ListenerURL == "" {
		o.ListenerURL = "https://" + net.JoinHostPort(o.ListenerNames[0], strconv.Itoa(o.listenerPort()))
	}
	return o
}

// listenerService is the name of the listener's Service of shard s, as the
// chart names it.
func listenerService(s shard.Shard) string {
	if !s.Enabled() {
		return "lifecycle-manager-listener"
	}
	return "lifecycle-manager-listener-" + strconv.Itoa(s.ID)
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

func (o WatcherOptions) listenerPort() int {
	_, port, err := net.SplitHostPort(o.ListenerAddress)
	if err != nil {
		return 8443
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 {
		return 8443
	}
	return p
}

// watcherSources are the event sources through which the controllers learn
// of reported changes: the Kymas whose runtime reported, and the Manifests
// whose module resources changed there.
type watcherSources struct {
	Kymas []source.Source
	// Manifests carries the Manifests whose module resources changed.
	Manifests <-chan event.TypedGenericEvent[*v1beta2.Manifest]
	// Reporting tells the Manifest controller whether a module's objects
	// are reported; a Ready Manifest whose are is checked every
	// ReportedReadyFactor Ready intervals.
	Reporting manifest.Reporting
	// KymaReporting tells the Kyma controller whether changes to a
	// runtime's own Kyma are reported; a Ready Kyma whose are is looked at
	// every ReportedReadyFactor Ready intervals.
	KymaReporting       kyma.Reporting
	ReportedReadyFactor int
	// Liveness tells the Kyma controller what was last heard from each
	// runtime's agent, for the WatcherReporting condition.
	Liveness kyma.Liveness
}

// setupWatcher wires the runtime watcher into mgr: the CA, the listener and
// its fallback, the agent and Watcher controllers and the default Watcher.
// Like every controller, it leaves the Kymas that policy pauses alone. It
// returns the sources through which the Kyma and Manifest controllers learn
// of reported changes (none when the watcher is disabled).
func setupWatcher(ctx context.Context, mgr ctrl.Manager, opts Options, runtimes remote.Runtimes, policy pause.Policy) (watcherSources, error) {
	if !opts.Watcher.enabled() {
		return watcherSources{}, nil
	}
	w := opts.Watcher.withDefaults(opts.Namespace, opts.Shard)
	paused, err := labels.Parse(w.PausedSelector)
	if err != nil {
		return watcherSources{}, fmt.Errorf("parsing the paused selector %q: %w", w.PausedSelector, err)
	}

	// The PKI namespace is outside the manager's cache, on purpose: its
	// Secrets are read by these reconcilers only, straight from the API.
	pkiClient, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return watcherSources{}, fmt.Errorf("creating the PKI client: %w", err)
	}
	ca, err := pki.EnsureCA(ctx, pkiClient, w.PKINamespace, w.CASecret, w.CAValidity)
	if err != nil {
		return watcherSources{}, err
	}

	watched := func(k *v1beta2.Kyma) bool { return watcherctrl.Reporting(k, policy, paused) }
	health := listener.NewHealth(w.SilenceTimeout)
	requeue, err := addListener(ctx, mgr, opts.Namespace, w, ca, health, watched)
	if err != nil {
		return watcherSources{}, err
	}
	if err := setupWatcherControllers(mgr, opts, w, watcherParts{pkiClient: pkiClient, runtimes: runtimes, ca: ca, policy: policy, paused: paused}); err != nil {
		return watcherSources{}, err
	}
	reporting := watcherReporting{
		reader: mgr.GetClient(), namespace: opts.Namespace, health: health, watched: watched,
		moduleResources: !w.NoModuleResources,
	}
	return watcherSources{
		Kymas:               []source.Source{source.Channel(requeue.kymas, &handler.TypedEnqueueRequestForObject[*v1beta2.Kyma]{})},
		Manifests:           requeue.manifests,
		Reporting:           reporting,
		KymaReporting:       reporting,
		Liveness:            reporting,
		ReportedReadyFactor: w.ReportedReadyFactor,
	}, nil
}

// listenerRequeues carry what the listener and its fallback requeue to the
// Kyma and Manifest controllers.
type listenerRequeues struct {
	kymas     chan event.TypedGenericEvent[*v1beta2.Kyma]
	manifests chan event.TypedGenericEvent[*v1beta2.Manifest]
}

// addListener adds the listener (mTLS, serving certificate from the CA) and
// its fallback for silent runtimes to mgr; watched tells the Kymas whose
// runtimes report.
func addListener(ctx context.Context, mgr ctrl.Manager, namespace string, w WatcherOptions, ca *pki.CA, health *listener.Health, watched func(*v1beta2.Kyma) bool) (listenerRequeues, error) {
	if err := listener.IndexRuntimeID(ctx, mgr.GetFieldIndexer()); err != nil {
		return listenerRequeues{}, fmt.Errorf("indexing Kymas by runtime id: %w", err)
	}
	requeue := listenerRequeues{
		kymas:     make(chan event.TypedGenericEvent[*v1beta2.Kyma], 1024),
		manifests: make(chan event.TypedGenericEvent[*v1beta2.Manifest], 1024),
	}
	var dnsNames []string
	var ips []net.IP
	for _, name := range w.ListenerNames {
		if ip := net.ParseIP(name); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, name)
		}
	}
	l, err := listener.New(listener.Options{
		Address:   w.ListenerAddress,
		ClientCAs: ca.Pool(),
		GetCertificate: pki.NewServingCertificate(ca, pki.Request{
			CommonName: "lifecycle-manager-listener", DNSNames: dnsNames, IPs: ips, Validity: w.CertValidity,
		}, w.RenewFraction).GetCertificate,
		Kymas:           listener.CacheLookup{Reader: mgr.GetClient(), Namespace: namespace},
		Requeue:         requeue.kymas,
		Manifests:       listener.CacheManifestLookup{Reader: mgr.GetClient(), Name: kyma.ManifestName},
		ManifestRequeue: requeue.manifests,
		Health:          health,
		RecheckAfter:    w.RecheckAfter,
		ReportRate:      w.ReportRate, // negative: no limit
		ReportBurst:     w.ReportBurst,
	})
	if err != nil {
		return listenerRequeues{}, err
	}
	if err := mgr.Add(l); err != nil {
		return listenerRequeues{}, err
	}
	if err := mgr.Add(&listener.Fallback{
		Reader: mgr.GetClient(), Namespace: namespace, Health: health,
		Interval: w.FallbackInterval, Requeue: requeue.kymas,
		Watched: watched,
	}); err != nil {
		return listenerRequeues{}, err
	}

	return requeue, nil
}

// watcherParts are what the watcher's controllers share with the rest.
type watcherParts struct {
	pkiClient client.Client
	runtimes  remote.Runtimes
	ca        *pki.CA
	policy    pause.Policy
	paused    labels.Selector
}

// setupWatcherControllers registers the agent controller, the Watcher status
// controller and the default Watcher.
func setupWatcherControllers(mgr ctrl.Manager, opts Options, w WatcherOptions, p watcherParts) error {
	if err := (&watcherctrl.AgentReconciler{
		Client:    mgr.GetClient(),
		PKIClient: p.pkiClient,
		Runtimes:  p.runtimes,
		CA:        p.ca,
		Recorder:  mgr.GetEventRecorder("lifecycle-manager"),
		Pause:     p.policy,
		Options: watcherctrl.AgentOptions{
			Namespace: opts.Namespace, PKINamespace: w.PKINamespace, SyncNamespace: opts.SyncNamespace,
			Validity: w.CertValidity, RenewFraction: w.RenewFraction,
			ListenerURL: w.ListenerURL, Image: w.AgentImage, LocalURL: w.LocalAgentURL,
			Paused: p.paused, Resync: w.Resync, ReconcileTimeout: opts.ReconcileTimeout,
			ModuleResources: !w.NoModuleResources,
		},
	}).SetupWithManager(mgr, watcherctrl.SetupOptions{
		MaxConcurrentReconciles: w.Concurrency, BaseBackoff: opts.BaseBackoff, MaxBackoff: opts.MaxBackoff,
	}); err != nil {
		return fmt.Errorf("setting up the watcher agent controller: %w", err)
	}
	// Watchers belong to no Kyma: the first shard alone writes their status
	// and creates the default one, so that shards do not write the same.
	if opts.Shard.ID != 0 {
		return nil
	}
	if err := (&watcherctrl.StatusReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Watcher controller: %w", err)
	}
	if !w.NoDefaultWatcher {
		if err := mgr.Add(watcherctrl.CreateDefault(mgr.GetClient(), watcherctrl.DefaultWatcher(opts.Namespace, int64(w.listenerPort())))); err != nil {
			return err
		}
	}
	return nil
}

// defaultAgentImage is the runtime-watcher image built with this operator,
// by digest, when make images stamped it; else the project's latest.
func defaultAgentImage() string {
	if version.AgentImage != "" {
		return version.AgentImage
	}
	return "ghcr.io/runtime-fleet/runtime-watcher:latest"
}

// Package watcher tests the runtime watcher end to end (SPEC R9): the whole
// operator in-process against a real control plane and a real runtime,
// whose kube-apiserver calls a real runtime-watcher agent (in-process, on
// loopback, registered by URL) over TLS, which reports over mutual TLS to
// the operator's listener; a registry holds one module, for reports about
// module resources. The benchmarks measure the latency from a change
// in a runtime to the start of the control plane's reconcile, and the
// listener's throughput.
package watcher

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

const (
	kcpNamespace = "kcp-system"
	pkiNamespace = "watcher-pki"

	// configMapWatcher watches ConfigMaps labelled watchLabel=watchValue in
	// runtimes, next to the default Watcher (runtime Kymas' spec).
	configMapWatcher = "configmaps"
	watchLabel       = "watcher-test"
	watchValue       = "yes"

	// pausedGroupLabel=yes is the operator's pause group (--pause-selector).
	pausedGroupLabel = "watcher-test-paused-group"

	// backedUpLabel=yes selects a Kyma for the daily backup schedule, so
	// that the backup alert's series exist (TestDashboardAndAlertSeriesExist).
	backedUpLabel = "watcher-test-backed-up"

	// Timing of the operator under test. Ready and Error intervals are an
	// hour so that nothing but a report (or the fallback) reconciles a Kyma
	// during a test: a Kyma that reacts within seconds was requeued by the
	// watcher.
	silenceTimeout   = 3 * time.Second
	fallbackInterval = time.Second
	heartbeat        = 500 * time.Millisecond
	recheckAfter     = 500 * time.Millisecond
	// certValidity is short so that certificates rotate every ~14 s during
	// the tests (renewal when half the lifetime is left).
	certValidity  = 30 * time.Second
	renewFraction = 0.5
)

var env struct {
	kcp       *testcluster.ControlPlane
	runtime   *testcluster.Runtime
	kcpClient client.Client
	rtClient  client.Client
	// listenerAddr is the operator's listener.
	listenerAddr string
	// metricsAddr serves the operator's /metrics (TestDashboardAndAlertSeriesExist).
	metricsAddr string
	// registry holds the evolving module (ConfigMaps only), for tests of
	// reports about module resources.
	registry *testregistry.Registry

	mu sync.Mutex
	// agentURLs are the webhook base URLs of in-process agents by Kyma.
	agentURLs map[string]string
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "watcher e2e", Runtimes: 1, Namespace: kcpNamespace}, setup)
}

// setup creates the ConfigMap Watcher, publishes the evolving module and
// configures the operator's watcher in local mode with short timings.
func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.kcpClient, env.runtime = e.KCP, e.Client, e.Runtimes[0]
	var err error
	if env.rtClient, err = testenv.NewClient(env.runtime.Config()); err != nil {
		return operator.Options{}, err
	}
	if err := env.kcpClient.Create(ctx, &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: configMapWatcher, Namespace: kcpNamespace},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "lifecycle-manager-listener", Namespace: kcpNamespace, Port: 8443},
			LabelsToWatch:   map[string]string{watchLabel: watchValue},
			ResourceToWatch: v1beta2.WatchableGVR{Version: "v1", Resource: "configmaps"},
			Field:           v1beta2.SpecField,
		},
	}); err != nil {
		return operator.Options{}, err
	}

	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)
	if err := publishEvolving(ctx); err != nil {
		return operator.Options{}, fmt.Errorf("publishing the evolving module: %w", err)
	}

	env.agentURLs = map[string]string{}
	if env.listenerAddr, err = freeAddr(); err != nil {
		return operator.Options{}, err
	}
	if env.metricsAddr, err = freeAddr(); err != nil {
		return operator.Options{}, err
	}
	opts := e.OperatorOptions()
	opts.MetricsAddr = env.metricsAddr
	// Only reports (or the fallback) may reconcile a Kyma: see the timing
	// constants above.
	opts.Intervals.Ready, opts.Intervals.Error, opts.Intervals.Warning = time.Hour, time.Hour, time.Hour
	// A module waiting for its manager or CR is not polled either: its
	// readiness must come through the agent's reports.
	opts.Intervals.Processing = 10 * time.Minute
	opts.Content.InsecureRegistries = []string{env.registry.Host()}
	opts.PauseSelector = pausedGroupLabel + "=yes"
	_, recipient, err := backup.NewIdentity()
	if err != nil {
		return operator.Options{}, err
	}
	if opts.Backup.Schedules, err = backup.Parse(fmt.Appendf(nil, `schedules:
  - name: daily
    selector: {matchLabels: {%s: "yes"}}
    schedule: "@daily"
    repository: %s/backups
    recipients: [%s]
`, backedUpLabel, env.registry.Host(), recipient)); err != nil {
		return operator.Options{}, err
	}
	// The listener's per-runtime rate limit is the default, which
	// TestFloodingRuntimeDoesNotHoldUpAnother relies on; the benchmarks
	// measure the listener itself, and their runtimes send far more than
	// their rate, so it is off for them.
	flag.Parse()
	reportRate := 0.0
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		reportRate = -1
	}
	opts.Watcher = operator.WatcherOptions{
		ListenerAddress:  env.listenerAddr,
		PKINamespace:     pkiNamespace,
		CertValidity:     certValidity,
		RenewFraction:    renewFraction,
		SilenceTimeout:   silenceTimeout,
		FallbackInterval: fallbackInterval,
		RecheckAfter:     recheckAfter,
		ReportRate:       reportRate,
		LocalAgentURL: func(kyma *v1beta2.Kyma) string {
			env.mu.Lock()
			defer env.mu.Unlock()
			return env.agentURLs[kyma.Name]
		},
	}
	return opts, nil
}

// publishEvolving pushes the evolving module's 1.0.0 and offers it in the
// regular channel.
func publishEvolving(ctx context.Context) error {
	v, err := samplemodules.Get(samplemodules.Evolving, "1.0.0")
	if err != nil {
		return err
	}
	artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), v.Module, v.Version), v.Content.Layers(), ociartifact.Insecure())
	if err != nil {
		return err
	}
	if err := env.kcpClient.Create(ctx, v.Template(kcpNamespace, artifact.Links)); err != nil {
		return err
	}
	return env.kcpClient.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, v.Module, map[string]string{"regular": v.Version}))
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Package rollout runs ModuleRollouts, maintenance windows and hibernation
// schedules through the whole operator, with a fake clock, against a real
// control plane and a real runtime API server: 20 Kymas share one
// runtime, each in a sync namespace of its own (SPEC R19), and what the
// fleet did is asserted from the Manifest transitions a watch recorded.
// The rollouts' analyses query a real Prometheus, which scrapes gauges
// the tests set.
package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/hibernation"
	"github.com/runtime-fleet/lifecycle-manager/internal/maintenance"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

const kcpNamespace = "kcp-system"

// The operator's clock starts on a Tuesday noon, outside the one
// maintenance window (Saturdays 02:00–04:00 UTC); tests move it.
var (
	clock   = clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	windows *maintenance.Policy
)

const windowsYAML = `
windows:
  - name: saturday-night
    days: [Sat]
    start: "02:00"
    duration: 2h
`

// Kymas labelled upgrades=manual upgrade manually, with a week's notice.
const upgradePoliciesYAML = `
policies:
  - name: owners-first
    selector: {matchLabels: {upgrades: manual}}
    upgrade: Manual
    forceAfter: 168h
`

// Kymas labelled hibernate=nap sleep every day from 13:00 to 14:00 UTC.
const schedulesYAML = `
schedules:
  - name: nap
    selector: {matchLabels: {hibernate: nap}}
    hibernate: "0 13 * * *"
    wake: "0 14 * * *"
`

var env struct {
	kcp       *testcluster.ControlPlane
	kcpClient client.WithWatch
	registry  *testregistry.Registry
	runtime   *testcluster.Runtime
	rtClient  client.Client
	// gauges are the metrics the rollouts' analyses query, through a real
	// Prometheus that scrapes them (analysis_test.go).
	gauges     *testcluster.Gauges
	prometheus *testcluster.Prometheus
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "rollout", Runtimes: 1, Namespace: kcpNamespace}, setup)
}

func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.runtime = e.KCP, e.Runtimes[0]
	var err error
	if env.kcpClient, err = client.NewWithWatch(e.KCP.Config(), client.Options{Scheme: e.Client.Scheme()}); err != nil {
		return operator.Options{}, err
	}
	if env.rtClient, err = testenv.NewClient(env.runtime.Config()); err != nil {
		return operator.Options{}, err
	}
	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)
	opts := e.OperatorOptions()
	opts.Content.InsecureRegistries = []string{env.registry.Host()}
	opts.CatalogSync = false
	if windows, err = maintenance.Parse([]byte(windowsYAML)); err != nil {
		return operator.Options{}, err
	}
	opts.MaintenanceWindows = windows
	if opts.HibernationSchedules, err = hibernation.Parse([]byte(schedulesYAML)); err != nil {
		return operator.Options{}, err
	}
	if opts.UpgradePolicy, err = upgradepolicy.Parse([]byte(upgradePoliciesYAML)); err != nil {
		return operator.Options{}, err
	}
	opts.Clock = clock
	// Content pins are checked again at every look: a moved tag halts a
	// rollout within seconds.
	opts.RolloutPoll = 2 * time.Second
	if env.gauges, err = testcluster.StartGauges(); err != nil {
		return operator.Options{}, err
	}
	e.Cleanup(func() { _ = env.gauges.Close() })
	if env.prometheus, err = testcluster.StartPrometheus(ctx, testcluster.PrometheusOptions{Targets: []string{env.gauges.Target()}}); err != nil {
		return operator.Options{}, err
	}
	e.Cleanup(func() { _ = env.prometheus.Stop() })
	opts.Analysis.PrometheusURL = env.prometheus.URL()
	return opts, nil
}

// publish pushes a module version whose content is the given YAML and
// creates its ModuleTemplate, changed by each of change. The template goes
// when the test ends, after the test's Kymas (cleanups run last first), so
// that the next run of the test (-count) can publish it again.
func publish(t *testing.T, module, version, content string, change ...func(*v1beta2.ModuleTemplate)) {
	t.Helper()
	ctx := context.Background()
	v := samplemodules.Version{Module: module, Version: version, Content: ociartifact.Module{RawManifest: []byte(content)}}
	artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), module, version), v.Content.Layers(), ociartifact.Insecure())
	Expect(err).NotTo(HaveOccurred())
	template := v.Template(kcpNamespace, artifact.Links)
	for _, c := range change {
		c(template)
	}
	Expect(env.kcpClient.Create(ctx, template)).To(Succeed())
	t.Cleanup(func() { Expect(client.IgnoreNotFound(env.kcpClient.Delete(ctx, template))).To(Succeed()) })
}

// offer creates the module's ModuleReleaseMeta with 1.0.0 on channel
// regular, deleted when the test ends, like publish's templates.
func offer(t *testing.T, module string) {
	t.Helper()
	ctx := context.Background()
	meta := samplemodules.ReleaseMeta(kcpNamespace, module, map[string]string{"regular": "1.0.0"})
	Expect(env.kcpClient.Create(ctx, meta)).To(Succeed())
	t.Cleanup(func() { Expect(client.IgnoreNotFound(env.kcpClient.Delete(ctx, meta))).To(Succeed()) })
}

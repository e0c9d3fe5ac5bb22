package metrics_test

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// describe is a collector's one Desc as text, which names the metric and
// its labels.
func describe(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 1)
	c.Describe(ch)
	return (<-ch).String()
}

// Dashboards and alerts (docs/operations.md, docs/watcher.md) use these
// names and labels; the operator and listener metrics are served from
// controller-runtime's registry.
func TestOperatorAndListenerMetricsOnControllerRuntimeRegistry(t *testing.T) {
	tests := []struct {
		collector prometheus.Collector
		name      string
		labels    string
	}{
		{metrics.ManifestReconciles, "lifecycle_manager_manifest_reconciles_total", "{}"},
		{metrics.KymaReconciles, "lifecycle_manager_kyma_reconciles_total", "{}"},
		{metrics.Requeues, "lifecycle_manager_requeues_total", "{controller,reason}"},
		{metrics.KymaState, "lifecycle_manager_kyma_state", "{kyma,state}"},
		{metrics.ModuleState, "lifecycle_manager_module_state", "{kyma,module,state}"},
		{metrics.ModuleTimeToReady, "lifecycle_manager_module_time_to_ready_seconds", "{module}"},
		{metrics.RuntimeSlotsFull, "lifecycle_manager_runtime_slots_full_total", "{controller}"},
		{metrics.ListenerRequests, "lifecycle_manager_listener_requests_total", "{path,code}"},
		{metrics.ListenerRejected, "lifecycle_manager_listener_rejected_total", "{reason}"},
		{metrics.ListenerReportsAccepted, "lifecycle_manager_listener_reports_accepted_total", "{}"},
		{metrics.ListenerLatency, "lifecycle_manager_listener_request_duration_seconds", "{path}"},
		{metrics.ListenerRechecks, "lifecycle_manager_listener_rechecks_total", "{}"},
		{metrics.ListenerInFlight, "lifecycle_manager_listener_in_flight_requests", "{}"},
		{metrics.ListenerRateLimitBuckets, "lifecycle_manager_listener_rate_limit_buckets", "{}"},
		{metrics.WatcherFallbackRequeues, "lifecycle_manager_watcher_fallback_requeues_total", "{}"},
		{metrics.WatcherSilentRuntimes, "lifecycle_manager_watcher_silent_runtimes", "{}"},
		{metrics.RolloutPhase, "lifecycle_manager_rollout_phase", "{rollout,module,channel,phase}"},
		{metrics.RolloutWave, "lifecycle_manager_rollout_wave", "{rollout,module,channel}"},
		{metrics.RolloutRuntimes, "lifecycle_manager_rollout_runtimes", "{rollout,module,channel,state}"},
		{metrics.RolloutHalted, "lifecycle_manager_rollout_halted", "{rollout,module,channel}"},
		{metrics.RolloutRollingBack, "lifecycle_manager_rollout_rolling_back", "{rollout,module,channel}"},
		{metrics.RolloutLastProgress, "lifecycle_manager_rollout_last_progress_timestamp_seconds", "{rollout,module,channel}"},
		{metrics.RolloutPlanned, "lifecycle_manager_rollout_planned_timestamp_seconds", "{rollout,module,channel,phase}"},
		{metrics.CachedObjects, "lifecycle_manager_cached_objects", "{shard,kind}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			desc := describe(tt.collector)
			g.Expect(desc).To(ContainSubstring(fmt.Sprintf("fqName: %q", tt.name)))
			g.Expect(desc).To(ContainSubstring("variableLabels: " + tt.labels))
			var already prometheus.AlreadyRegisteredError
			g.Expect(errors.As(crmetrics.Registry.Register(tt.collector), &already)).To(BeTrue(), "registered on controller-runtime's registry")
		})
	}
}

// Each agent has a registry of its own, which it serves itself: several
// agents run in one process in tests and the dev environment, and none of
// their metrics is on the operator's registry.
func TestAgentMetricsOnARegistryPerAgent(t *testing.T) {
	g := NewWithT(t)
	first, second := metrics.NewAgent(), metrics.NewAgent()
	tests := []struct {
		collector func(*metrics.Agent) prometheus.Collector
		name      string
		labels    string
	}{
		{func(a *metrics.Agent) prometheus.Collector { return a.AdmissionRequests }, "runtime_watcher_admission_requests_total", "{operation,result}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.ReportsSent }, "runtime_watcher_reports_sent_total", "{}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.ReportsCoalesced }, "runtime_watcher_reports_coalesced_total", "{}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.ReportRetries }, "runtime_watcher_report_retries_total", "{}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.ReportFailures }, "runtime_watcher_report_failures_total", "{reason}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.ReportLatency }, "runtime_watcher_report_latency_seconds", "{}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.Heartbeats }, "runtime_watcher_heartbeats_total", "{result}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.CertificateReloads }, "runtime_watcher_certificate_reloads_total", "{kind}"},
		{func(a *metrics.Agent) prometheus.Collector { return a.Pending }, "runtime_watcher_reports_pending", "{}"},
	}
	for _, tt := range tests {
		c := tt.collector(first)
		desc := describe(c)
		g.Expect(desc).To(ContainSubstring(fmt.Sprintf("fqName: %q", tt.name)))
		g.Expect(desc).To(ContainSubstring("variableLabels: " + tt.labels))
		var already prometheus.AlreadyRegisteredError
		g.Expect(errors.As(first.Registry.Register(c), &already)).To(BeTrue(), "%s is on its agent's registry", tt.name)
		g.Expect(crmetrics.Registry.Register(c)).To(Succeed(), "%s is not on controller-runtime's registry", tt.name)
		g.Expect(crmetrics.Registry.Unregister(c)).To(BeTrue())
	}

	first.ReportsSent.Inc()
	families, err := second.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	sent := -1.0
	for _, f := range families {
		if f.GetName() == "runtime_watcher_reports_sent_total" {
			sent = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	g.Expect(sent).To(BeZero(), "agents share no counters")
}

package metrics_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// The chart's LifecycleManagerBackupsStale, evaluated by a real Prometheus
// (bin/prometheus) over the backups' metrics as the operator sets them:
// of an hourly runtime backed up 50 minutes ago, one 3 hours ago, a daily
// one 30 hours ago, one that moved from the hourly to the daily schedule
// and one forgotten (deleted), only the 3-hour-old hourly one is stale.
// The alert's `for` is Prometheus's own and not tested here.
func TestBackupsStaleAlertFindsTheStaleRuntime(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	chart, _, _ := shippedRules(t)
	var expr string
	for _, rule := range chart {
		if rule.Alert == "LifecycleManagerBackupsStale" {
			expr = rule.Expr
		}
	}
	g.Expect(expr).NotTo(BeEmpty(), "the chart ships LifecycleManagerBackupsStale")

	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics.BackupCollectors()...)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	server := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { _ = server.Close() })

	now := time.Now()
	metrics.BackupScheduleInterval.WithLabelValues("hourly").Set(time.Hour.Seconds())
	metrics.BackupScheduleInterval.WithLabelValues("daily").Set((24 * time.Hour).Seconds())
	metrics.SetBackupLastSuccess("fresh", "hourly", now.Add(-50*time.Minute))
	metrics.SetBackupLastSuccess("stale", "hourly", now.Add(-3*time.Hour))
	metrics.SetBackupLastSuccess("daily", "daily", now.Add(-30*time.Hour))
	metrics.SetBackupLastSuccess("moved", "hourly", now.Add(-5*time.Hour))
	metrics.SetBackupLastSuccess("moved", "daily", now.Add(-5*time.Hour))
	metrics.SetBackupLastSuccess("gone", "hourly", now.Add(-5*time.Hour))
	metrics.ForgetBackups("gone")
	t.Cleanup(func() {
		for _, kyma := range []string{"fresh", "stale", "daily", "moved"} {
			metrics.ForgetBackups(kyma)
		}
	})

	prom, err := testcluster.StartPrometheus(ctx, testcluster.PrometheusOptions{Targets: []string{listener.Addr().String()}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = prom.Stop() })

	// Every series comes with the first scrape: wait for it, then the
	// answer is the alert's.
	g.Eventually(func(g Gomega) {
		scraped, err := prom.Samples(ctx, "lifecycle_manager_backup_last_success_timestamp_seconds", "kyma")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(scraped).To(HaveLen(4))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	stale, err := prom.Samples(ctx, expr, "kyma")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stale).To(HaveLen(1))
	g.Expect(stale).To(HaveKey("stale"))
	g.Expect(stale["stale"]).To(BeNumerically("~", (3*time.Hour).Seconds(), 5*time.Minute.Seconds()), "the value is the backup's age")
}

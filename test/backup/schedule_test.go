package backup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
)

// gauge is the value of the operator's gauge family with the given label
// values, as its metrics endpoint would serve it; false when the series
// does not exist.
func gauge(g Gomega, family string, labels map[string]string) (float64, bool) {
	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				if f.GetType() == dto.MetricType_HISTOGRAM {
					return float64(m.GetHistogram().GetSampleCount()), true
				}
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	matched := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
			matched++
		}
	}
	return matched == len(labels)
}

// registerRuntimes registers a runtime for each prefix, on the hourly
// schedule, deleted when the test ends. Their names end in the clock's
// time, new in each run (-count): a Kyma registered again within its grace
// period would keep its RuntimeBackup and its history.
func registerRuntimes(t *testing.T, prefixes ...string) []string {
	t.Helper()
	suffix := clock.Now().Format("0102150405")
	names := make([]string, 0, len(prefixes))
	for _, prefix := range prefixes {
		name := prefix + "-" + suffix
		register(t, name, env.runtimes[0])
		t.Cleanup(func() { unregister(name) })
		names = append(names, name)
	}
	return names
}

// nextScheduleTime waits for the RuntimeBackup's nextScheduleTime.
func nextScheduleTime(name string) time.Time {
	var next time.Time
	Eventually(func(g Gomega) {
		rb := runtimeBackup(g, name)
		g.Expect(rb.Status.NextScheduleTime).NotTo(BeNil())
		next = rb.Status.NextScheduleTime.Time
	}, timeout, interval).Should(Succeed())
	return next
}

// Runtimes on the same hourly schedule are due at different minutes of the
// hour, each inside the hour to come, at the time any operator process
// computes for its name; a runtime keeps its minute from hour to hour. The
// metric of its last good backup follows it: its RuntimeBackup's creation
// before the first backup, the backup's time after, gone once the Kyma is.
func TestJitterSpreadsRuntimesOverTheHour(t *testing.T) {
	RegisterTestingT(t)
	names := registerRuntimes(t, "spread-a", "spread-b", "spread-c")
	now := clock.Now()
	// The time any operator process (a restarted one, another shard)
	// computes from the name alone.
	schedule := env.schedules.For(map[string]string{"backup": "hourly"})
	offsets := map[time.Duration]bool{}
	for _, name := range names {
		next := nextScheduleTime(name)
		Expect(next).To(BeTemporally("==", schedule.NextFor(name, now)), "%s: the time any process computes", name)
		Expect(next.Sub(now)).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Hour)), name)
		offsets[next.Sub(next.Truncate(time.Hour))] = true
	}
	Expect(offsets).To(HaveLen(len(names)), "each at its own minute")

	name := names[0]
	rb := runtimeBackup(Default, name)
	labels := map[string]string{"kyma": name, "schedule": "hourly"}
	Eventually(func(g Gomega) {
		last, ok := gauge(g, "lifecycle_manager_backup_last_success_timestamp_seconds", labels)
		g.Expect(ok).To(BeTrue())
		g.Expect(last).To(Equal(float64(rb.CreationTimestamp.Unix())), "no backup yet: counted from the creation")
	}, timeout, interval).Should(Succeed())
	longest, ok := gauge(Default, "lifecycle_manager_backup_schedule_interval_seconds", map[string]string{"schedule": "hourly"})
	Expect(ok).To(BeTrue())
	Expect(longest).To(Equal(time.Hour.Seconds()))

	next := nextScheduleTime(name)
	backupAt(name, next)
	Expect(nextScheduleTime(name)).To(BeTemporally("==", next.Add(time.Hour)), "the same minute the next hour")
	Eventually(func(g Gomega) {
		last, ok := gauge(g, "lifecycle_manager_backup_last_success_timestamp_seconds", labels)
		g.Expect(ok).To(BeTrue())
		g.Expect(last).To(Equal(float64(next.Unix())))
	}, timeout, interval).Should(Succeed())

	unregister(name)
	Eventually(func(g Gomega) {
		_, ok := gauge(g, "lifecycle_manager_backup_last_success_timestamp_seconds", labels)
		g.Expect(ok).To(BeFalse(), "a deleted runtime's backups are only kept: no series, no alert")
	}, timeout, interval).Should(Succeed())
}

// More backups due at once than the budget admits (the tests' operator
// allows one at a time): the others wait their turn and are all taken,
// each tagged with the time it was taken.
func TestDueBackupsWaitForTheBudget(t *testing.T) {
	RegisterTestingT(t)
	names := registerRuntimes(t, "budget-a", "budget-b", "budget-c")
	var latest time.Time
	for _, name := range names {
		if next := nextScheduleTime(name); next.After(latest) {
			latest = next
		}
	}
	taken, _ := gauge(Default, "lifecycle_manager_backup_duration_seconds", nil)
	// All three are due at once.
	clock.SetTime(latest)
	for _, name := range names {
		Eventually(func(g Gomega) {
			rb := runtimeBackup(g, name)
			g.Expect(rb.Status.LastBackup).To(Equal(backup.Tag(latest)), "lastError: %s", rb.Status.LastError)
		}, timeout, interval).Should(Succeed())
	}
	limit, ok := gauge(Default, "lifecycle_manager_backup_parallel_limit", nil)
	Expect(ok).To(BeTrue())
	Expect(limit).To(Equal(1.0))
	after, _ := gauge(Default, "lifecycle_manager_backup_duration_seconds", nil)
	Expect(after-taken).To(BeNumerically(">=", len(names)), "each backup timed for the budget")
	inFlight, _ := gauge(Default, "lifecycle_manager_backups_in_flight", nil)
	Expect(inFlight).To(BeZero())
}

package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The backups' metrics (docs/operations.md, "Backups and restore"). One
// series per backed-up runtime says when its last good backup was taken,
// as lifecycle_manager_kyma_state has one per Kyma; one per schedule says
// how far apart a runtime's backups may be, so that an alert can tell a
// stale backup from a daily one without knowing the schedules. The rest
// are one series each, whatever the fleet's size.

var (
	// BackupLastSuccess is when each runtime's last good backup was taken.
	BackupLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_backup_last_success_timestamp_seconds",
		Help: "When the last successful backup of a runtime was taken (its RuntimeBackup's creation while none succeeded yet), in Unix seconds, by Kyma and backup schedule. Only runtimes a schedule selects, not deleted ones in their grace period.",
	}, []string{"kyma", "schedule"})

	// BackupScheduleInterval is the longest gap between two firings of
	// each schedule, which bounds the gap between two backups of a runtime
	// on it: the jitter keeps each backup inside its own gap.
	BackupScheduleInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lifecycle_manager_backup_schedule_interval_seconds",
		Help: "The longest time between two firings of a backup schedule, and so between two backups of one runtime on it, in seconds.",
	}, []string{"schedule"})

	// BackupParallelLimit is how many backups the budget lets run at once.
	BackupParallelLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_backup_parallel_limit",
		Help: "How many backups this operator process lets run at once: twice the rate at which backups fall due times their recent duration, at most --backup-max-concurrency.",
	})

	// BackupsInFlight is how many backups run now.
	BackupsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycle_manager_backups_in_flight",
		Help: "Backups being taken by this operator process now.",
	})

	// BackupDuration observes how long one backup takes: the snapshot, the
	// push and the thinning.
	BackupDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "lifecycle_manager_backup_duration_seconds",
		Help:    "How long one backup takes: reading the runtime, encrypting, pushing to the registry and deleting old backups.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 180},
	})
)

func backupCollectors() []prometheus.Collector {
	return []prometheus.Collector{BackupLastSuccess, BackupScheduleInterval, BackupParallelLimit, BackupsInFlight, BackupDuration}
}

// backupSchedules remembers the schedule each runtime's series was set
// with, so that a runtime that moves to another schedule loses its old
// series, deleted by its full labels.
var backupSchedules = struct {
	sync.Mutex
	byKyma map[string]string
}{byKyma: map[string]string{}}

// SetBackupLastSuccess sets when the Kyma's last good backup on schedule
// was taken.
func SetBackupLastSuccess(kyma, schedule string, at time.Time) {
	backupSchedules.Lock()
	defer backupSchedules.Unlock()
	if old, ok := backupSchedules.byKyma[kyma]; ok && old != schedule {
		BackupLastSuccess.DeleteLabelValues(kyma, old)
	}
	backupSchedules.byKyma[kyma] = schedule
	BackupLastSuccess.WithLabelValues(kyma, schedule).Set(float64(at.UnixNano()) / 1e9)
}

// ForgetBackups deletes the Kyma's series: no schedule selects it, or it is
// deleted and its backups are only kept.
func ForgetBackups(kyma string) {
	backupSchedules.Lock()
	defer backupSchedules.Unlock()
	if old, ok := backupSchedules.byKyma[kyma]; ok {
		BackupLastSuccess.DeleteLabelValues(kyma, old)
		delete(backupSchedules.byKyma, kyma)
	}
}

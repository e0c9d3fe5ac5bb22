package kyma

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// AgentLiveness is what the operator last heard from a runtime's watcher
// agent, as its listener remembers it.
type AgentLiveness int

const (
	// AgentNotWatched means that the runtime has no agent to hear from (no runtime
	// id, reporting paused, or no watcher at all).
	AgentNotWatched AgentLiveness = iota
	// AgentPending means not heard from yet, but within the grace after the
	// operator started; nothing is known either way.
	AgentPending
	// AgentHeard means that a report or heartbeat came within the silence timeout.
	AgentHeard
	// AgentSilent means that nothing came for longer than the silence timeout.
	AgentSilent
)

// Liveness tells a runtime's AgentLiveness now. The listener's Health
// answers it from memory, so asking costs no request.
type Liveness interface {
	AgentLiveness(kyma *v1beta2.Kyma, now time.Time) AgentLiveness
}

// setWatcherReporting sets the WatcherReporting condition from the agent's
// liveness. Its status, reason and message depend on the liveness alone, so
// that a Kyma whose liveness did not change gets the very same condition
// and its status patch stays empty: heartbeats never cost a write. Pending
// leaves the condition as it was, so that an operator restart does not
// wipe what was known.
func setWatcherReporting(conditions *[]metav1.Condition, l AgentLiveness) {
	switch l {
	case AgentNotWatched:
		meta.RemoveStatusCondition(conditions, v1beta2.ConditionWatcherReporting)
	case AgentHeard:
		meta.SetStatusCondition(conditions, metav1.Condition{
			Type: v1beta2.ConditionWatcherReporting, Status: metav1.ConditionTrue,
			Reason: v1beta2.ReasonWatcherHeard, Message: "The runtime's watcher agent reports",
		})
	case AgentSilent:
		meta.SetStatusCondition(conditions, metav1.Condition{
			Type: v1beta2.ConditionWatcherReporting, Status: metav1.ConditionFalse,
			Reason: v1beta2.ReasonWatcherSilent, Message: "Nothing heard from the runtime's watcher agent within the silence timeout",
		})
	case AgentPending:
	}
}

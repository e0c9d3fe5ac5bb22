package kyma

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// TestSetWatcherReporting: the condition follows the agent's liveness, a
// pending one keeps what was known, and an unchanged liveness keeps the
// condition as it was (its transition time too), so that nothing is written.
func TestSetWatcherReporting(t *testing.T) {
	earlier := metav1.Unix(1000, 0)
	heard := metav1.Condition{Type: v1beta2.ConditionWatcherReporting, Status: metav1.ConditionTrue, Reason: v1beta2.ReasonWatcherHeard,
		Message: "The runtime's watcher agent reports", LastTransitionTime: earlier}
	tests := []struct {
		name       string
		before     []metav1.Condition
		liveness   AgentLiveness
		wantStatus metav1.ConditionStatus // "" means absent
		wantReason string
		keepsTime  bool
	}{
		{name: "first heard", liveness: AgentHeard, wantStatus: metav1.ConditionTrue, wantReason: v1beta2.ReasonWatcherHeard},
		{name: "still heard keeps the condition", before: []metav1.Condition{heard}, liveness: AgentHeard,
			wantStatus: metav1.ConditionTrue, wantReason: v1beta2.ReasonWatcherHeard, keepsTime: true},
		{name: "heard turns silent", before: []metav1.Condition{heard}, liveness: AgentSilent,
			wantStatus: metav1.ConditionFalse, wantReason: v1beta2.ReasonWatcherSilent},
		{name: "pending keeps what was known", before: []metav1.Condition{heard}, liveness: AgentPending,
			wantStatus: metav1.ConditionTrue, wantReason: v1beta2.ReasonWatcherHeard, keepsTime: true},
		{name: "pending without a condition adds none", liveness: AgentPending},
		{name: "no agent removes it", before: []metav1.Condition{heard}, liveness: AgentNotWatched},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conditions := append([]metav1.Condition(nil), tt.before...)
			setWatcherReporting(&conditions, tt.liveness)
			c := meta.FindStatusCondition(conditions, v1beta2.ConditionWatcherReporting)
			if tt.wantStatus == "" {
				if c != nil {
					t.Fatalf("condition %+v, want none", *c)
				}
				return
			}
			if c == nil {
				t.Fatal("no condition")
			}
			if c.Status != tt.wantStatus || c.Reason != tt.wantReason {
				t.Fatalf("condition %s/%s, want %s/%s", c.Status, c.Reason, tt.wantStatus, tt.wantReason)
			}
			if got := c.LastTransitionTime.Equal(&earlier); got != tt.keepsTime {
				t.Fatalf("lastTransitionTime kept = %v, want %v", got, tt.keepsTime)
			}
		})
	}
}

package kyma

import (
	"testing"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

func TestAnnounce(t *testing.T) {
	tests := []struct {
		name  string
		state v1beta2.State
		want  bool
	}{
		{name: "never reported on", state: "", want: true},
		{name: "Processing", state: v1beta2.StateProcessing, want: false},
		{name: "Ready", state: v1beta2.StateReady, want: false},
		{name: "Error", state: v1beta2.StateError, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kyma := &v1beta2.Kyma{Status: v1beta2.KymaStatus{State: tt.state}}
			o, ok := announce(kyma)
			if ok != tt.want {
				t.Fatalf("announce of a Kyma in state %q = %v, want %v", tt.state, ok, tt.want)
			}
			if o.Kind != reconciler.KindProgressing || o.Reason != ReasonReconcileStarted {
				t.Errorf("announce outcome = %v %q, want Progressing %q", o.Kind, o.Reason, ReasonReconcileStarted)
			}
			recorded := kyma.DeepCopy()
			recordOutcome(recorded, o)
			if ok && recorded.Status.State != v1beta2.StateProcessing {
				t.Errorf("the announced state is %q, want Processing", recorded.Status.State)
			}
		})
	}
}

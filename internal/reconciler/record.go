package reconciler

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Status is the part of a kind's status the skeleton writes.
type Status struct {
	Conditions         *[]metav1.Condition
	State              *v1beta2.State
	ObservedGeneration *int64
}

// Record writes o into s: the kstatus conditions, the state derived from
// them, and observedGeneration, which moves only when the spec was fully
// processed (Ready, Warning, or progressing towards it) or found to be
// impossible (Stalled), so that a reader comparing it with
// metadata.generation knows whether the status speaks of the current spec.
// kstatus reads a Stalled object whose observedGeneration lags as
// InProgress, not Failed; Flux moves it on a stall for the same reason.
func Record(s Status, generation int64, o Outcome) {
	if !o.Records() {
		return
	}
	SetConditions(s.Conditions, generation, o)
	*s.State = StateOf(*s.Conditions)
	switch o.Kind {
	case KindReady, KindWarning, KindProgressing, KindStalled:
		if s.ObservedGeneration != nil {
			*s.ObservedGeneration = generation
		}
	default:
	}
}

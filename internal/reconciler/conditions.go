package reconciler

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// SetConditions records o in conditions as kstatus reads them: Ready always,
// Reconciling and Stalled only while True. A condition whose status, reason
// and message stay the same keeps its lastTransitionTime, so a steady object
// is not rewritten. Messages are bounded (BoundMessage): some quote what a
// module or a registry said.
func SetConditions(conditions *[]metav1.Condition, generation int64, o Outcome) {
	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: BoundMessage(message), ObservedGeneration: generation,
		})
	}
	switch o.Kind {
	case KindReady, KindWarning:
		set(v1beta2.ConditionReady, metav1.ConditionTrue, o.Reason, o.Message)
		meta.RemoveStatusCondition(conditions, v1beta2.ConditionReconciling)
		meta.RemoveStatusCondition(conditions, v1beta2.ConditionStalled)
	case KindProgressing, KindRetry, KindDeleting:
		set(v1beta2.ConditionReady, metav1.ConditionFalse, o.Reason, o.Message)
		set(v1beta2.ConditionReconciling, metav1.ConditionTrue, reconcilingReason(o.Kind), o.Message)
		meta.RemoveStatusCondition(conditions, v1beta2.ConditionStalled)
	case KindStalled:
		set(v1beta2.ConditionReady, metav1.ConditionFalse, o.Reason, o.Message)
		set(v1beta2.ConditionStalled, metav1.ConditionTrue, o.Reason, o.Message)
		meta.RemoveStatusCondition(conditions, v1beta2.ConditionReconciling)
	case KindDone, KindConflict, KindPaused:
	}
}

func reconcilingReason(k Kind) string {
	switch k {
	case KindRetry:
		return v1beta2.ReasonProgressingWithRetry
	case KindDeleting:
		return v1beta2.ReasonDeleting
	default:
		return v1beta2.ReasonProgressing
	}
}

// StateOf derives the KLM-compatible status.state from kstatus conditions:
// Stalled or a retry is Error, a deletion under way Deleting, other work
// Processing, Ready=True Ready (Warning with reason Warning). No Ready
// condition yet is Processing.
func StateOf(conditions []metav1.Condition) v1beta2.State {
	if meta.IsStatusConditionTrue(conditions, v1beta2.ConditionStalled) {
		return v1beta2.StateError
	}
	if c := meta.FindStatusCondition(conditions, v1beta2.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		switch c.Reason {
		case v1beta2.ReasonProgressingWithRetry:
			return v1beta2.StateError
		case v1beta2.ReasonDeleting:
			return v1beta2.StateDeleting
		default:
			return v1beta2.StateProcessing
		}
	}
	ready := meta.FindStatusCondition(conditions, v1beta2.ConditionReady)
	switch {
	case ready == nil:
		return v1beta2.StateProcessing
	case ready.Status != metav1.ConditionTrue:
		return v1beta2.StateError
	case ready.Reason == v1beta2.ReasonWarning:
		return v1beta2.StateWarning
	default:
		return v1beta2.StateReady
	}
}

package declarative

import (
	"fmt"
	"strings"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// State is a module resource's status.state, as the lifecycle manager reads it.
type State string

// The states a module resource reports.
const (
	StateReady      State = "Ready"
	StateProcessing State = "Processing"
	StateError      State = "Error"
	StateDeleting   State = "Deleting"
)

// ConditionReady is the one condition the library owns.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	ReasonInstalled    = "Installed"
	ReasonProgressing  = "Progressing"
	ReasonRenderFailed = "RenderFailed"
	ReasonApplyFailed  = "ApplyFailed"
	ReasonObjectFailed = "ObjectFailed"
	ReasonDeleting     = "Deleting"
	ReasonDeleteFailed = "DeleteFailed"
	ReasonPruneFailed  = "PruneFailed"
)

// Status is what one reconcile reports: the state, and the Ready condition's
// reason and message.
type Status struct {
	State   State
	Reason  string
	Message string
	// Inventory is what the resource's objects are now; nil leaves the
	// recorded one as it is (a render that failed prunes nothing).
	Inventory []Ref
}

// statusOf says how the applied objects are, from their kstatus results: Ready
// when every one is Current, Error when one Failed, Processing otherwise. It
// looks only at what it is given, so that it is table-tested.
func statusOf(objects []*unstructured.Unstructured) Status {
	var progressing []string
	for _, obj := range objects {
		res, err := kstatus.Compute(obj)
		if err != nil {
			return Status{State: StateError, Reason: ReasonObjectFailed, Message: fmt.Sprintf("%s %s: status unreadable", obj.GetKind(), obj.GetName())}
		}
		switch res.Status {
		case kstatus.CurrentStatus:
		case kstatus.FailedStatus:
			return Status{State: StateError, Reason: ReasonObjectFailed, Message: fmt.Sprintf("%s %s failed: %s", obj.GetKind(), obj.GetName(), res.Message)}
		default:
			progressing = append(progressing, obj.GetKind()+" "+obj.GetName())
		}
	}
	if len(progressing) > 0 {
		return Status{State: StateProcessing, Reason: ReasonProgressing, Message: "Waiting for " + joinAtMost(progressing, 3)}
	}
	return Status{State: StateReady, Reason: ReasonInstalled, Message: fmt.Sprintf("%d objects applied and ready", len(objects))}
}

func joinAtMost(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// setStatus writes s into obj's status: state, the Ready condition (its
// transition time moves only when its status does) and, when the state is
// Ready, observedGeneration.
func setStatus(obj *unstructured.Unstructured, s Status, now metav1.Time) error {
	if err := unstructured.SetNestedField(obj.Object, string(s.State), "status", "state"); err != nil {
		return err
	}
	if s.Inventory != nil {
		if err := unstructured.SetNestedSlice(obj.Object, inventoryValue(s.Inventory), "status", "inventory"); err != nil {
			return err
		}
	}
	condStatus := metav1.ConditionFalse
	if s.State == StateReady {
		condStatus = metav1.ConditionTrue
	}
	cond := map[string]any{
		"type": ConditionReady, "status": string(condStatus), "reason": s.Reason, "message": s.Message,
		"observedGeneration": obj.GetGeneration(), "lastTransitionTime": now.UTC().Format("2006-01-02T15:04:05Z"),
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	replaced := false
	for i, c := range conds {
		old, ok := c.(map[string]any)
		if !ok || old["type"] != ConditionReady {
			continue
		}
		if old["status"] == cond["status"] {
			cond["lastTransitionTime"] = old["lastTransitionTime"]
		}
		conds[i] = cond
		replaced = true
	}
	if !replaced {
		conds = append(conds, cond)
	}
	if err := unstructured.SetNestedSlice(obj.Object, conds, "status", "conditions"); err != nil {
		return err
	}
	if s.State == StateReady {
		return unstructured.SetNestedField(obj.Object, obj.GetGeneration(), "status", "observedGeneration")
	}
	return nil
}

package manifest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// Operation history (SPEC G4). Each reconcile's outcome is noted in the
// operation it belongs to, in status.operations: an install, an upgrade, a
// drift repair, a removal or a deletion, with the versions, the times and
// how it stands (InProgress, Ready, Error = retrying by itself, Failed =
// needs a human). An operation changes only when the state or the Ready
// reason changes, which the status records anyway, so history costs no
// write of its own; a drift repair, which otherwise changes nothing in
// the status, is the one exception, and a rare one.

// operationSeen is what a reconcile tells the history besides its outcome.
type operationSeen struct {
	// removal is the type of a Manifest being deleted: Removal, or
	// Deletion when its Kyma is being deleted (or gone).
	removal v1beta2.OperationType
	// driftRepaired says that the reconcile put back objects someone
	// changed in the runtime.
	driftRepaired bool
	// stateBefore and observedBefore are the status as the reconcile found
	// it, before the outcome was recorded.
	stateBefore    v1beta2.State
	observedBefore int64
}

// recordWithHistory is the skeleton's Record: the outcome in the status
// (record), then in the operation history. kyma is the Manifest's Kyma,
// nil when it is gone.
func (r *Reconciler) recordWithHistory(kyma *v1beta2.Kyma) func(*v1beta2.Manifest, reconciler.Outcome) {
	return func(m *v1beta2.Manifest, o reconciler.Outcome) {
		_, repaired := r.repaired.LoadAndDelete(m.UID)
		seen := operationSeen{
			removal:        v1beta2.OperationRemoval,
			driftRepaired:  repaired,
			stateBefore:    m.Status.State,
			observedBefore: m.Status.ObservedGeneration,
		}
		if kyma == nil || !kyma.DeletionTimestamp.IsZero() {
			seen.removal = v1beta2.OperationDeletion
		}
		now := r.now()
		record(m, o, now)
		noteOperation(m, o, seen, now)
		addNotes(m, r.notes.take(m.UID))
	}
}

// noteOperation records outcome o in the Manifest's operations at now.
func noteOperation(m *v1beta2.Manifest, o reconciler.Outcome, seen operationSeen, now time.Time) {
	result, ok := operationResult(o)
	if !ok {
		return
	}
	ops := m.Status.Operations
	open := len(ops) > 0 && ops[0].FinishedAt == nil
	op, ok := currentOperation(m, seen)
	if !ok {
		if open && result == v1beta2.OperationReady {
			// The module is Ready at the installed version again (the
			// channel moved back before the open operation succeeded): that
			// operation is over, as far as it got.
			ops[0].FinishedAt = &metav1.Time{Time: now}
		}
		return
	}
	if open && sameOperation(ops[0], op) {
		op = ops[0]
	} else {
		if open {
			// Superseded (a new version before the last one was Ready):
			// its result says how far it got.
			ops[0].FinishedAt = &metav1.Time{Time: now}
		}
		op.StartedAt = metav1.Time{Time: now}
		ops = append([]v1beta2.Operation{op}, ops...)
	}
	op.Result, op.Code = result, ""
	if result == v1beta2.OperationError || result == v1beta2.OperationFailed {
		op.Code = o.Reason
	}
	if result == v1beta2.OperationReady {
		op.FinishedAt = &metav1.Time{Time: now}
	}
	ops[0] = op
	m.Status.Operations = ops[:min(len(ops), v1beta2.MaxManifestOperations)]
}

// operationResult maps an outcome to an operation's result; outcomes that
// record nothing (done, conflict, paused) have none.
func operationResult(o reconciler.Outcome) (v1beta2.OperationResult, bool) {
	switch o.Kind {
	case reconciler.KindReady, reconciler.KindWarning:
		return v1beta2.OperationReady, true
	case reconciler.KindProgressing, reconciler.KindDeleting:
		return v1beta2.OperationInProgress, true
	case reconciler.KindRetry:
		return v1beta2.OperationError, true
	case reconciler.KindStalled:
		return v1beta2.OperationFailed, true
	default:
		return "", false
	}
}

// currentOperation is the operation the reconcile works on, without its
// times and result; false when it works on none (a Ready module checked,
// or one whose health changed by itself, which is not an operation).
func currentOperation(m *v1beta2.Manifest, seen operationSeen) (v1beta2.Operation, bool) {
	installed, known := installedVersion(m, seen)
	switch {
	case !m.DeletionTimestamp.IsZero():
		return v1beta2.Operation{Type: seen.removal, FromVersion: installed}, seen.removal != ""
	case !known:
		return v1beta2.Operation{Type: v1beta2.OperationInstall, ToVersion: m.Spec.Version}, true
	case installed != m.Spec.Version:
		return v1beta2.Operation{Type: v1beta2.OperationUpgrade, FromVersion: installed, ToVersion: m.Spec.Version}, true
	case seen.driftRepaired:
		return v1beta2.Operation{Type: v1beta2.OperationDriftRepair, FromVersion: installed, ToVersion: installed}, true
	default:
		return v1beta2.Operation{}, false
	}
}

// installedVersion is the version the runtime has: the target of the
// newest operation that ended Ready. A Manifest from before operations
// were kept, which its status shows installed, counts as installed at its
// spec's version, so that an operator upgrade records no install for every
// module. known is false while nothing is installed.
func installedVersion(m *v1beta2.Manifest, seen operationSeen) (version string, known bool) {
	for _, op := range m.Status.Operations {
		if op.Result == v1beta2.OperationReady && op.ToVersion != "" {
			return op.ToVersion, true
		}
	}
	if len(m.Status.Operations) == 0 && seen.observedBefore != 0 &&
		(seen.stateBefore == v1beta2.StateReady || seen.stateBefore == v1beta2.StateWarning) {
		return m.Spec.Version, true
	}
	return "", false
}

// sameOperation tells whether two operations are the same one: same type
// and versions.
func sameOperation(a, b v1beta2.Operation) bool {
	return a.Type == b.Type && a.FromVersion == b.FromVersion && a.ToVersion == b.ToVersion
}

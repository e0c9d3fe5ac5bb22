package kyma

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Removals in the operation history (SPEC G4). A module's operations live
// in its Manifest's status, which goes when the module is removed; so the
// Kyma keeps each removal: while it is under way on the module's status
// entry (status.modules[].removal, the Manifest's own record once it has
// one), and once the module is gone in status.operations, Ready. Both
// change only with the module's entry, which the status writes anyway.

// noteRemovals fills the removal of every module being deleted in
// kyma.Status.Modules and moves the removals of modules gone since
// previous into kyma.Status.Operations, at now.
func noteRemovals(kyma *v1beta2.Kyma, previous []v1beta2.ModuleStatus, manifests map[string]*v1beta2.Manifest, now metav1.Time) {
	if !anyDeleting(previous) && !anyDeleting(kyma.Status.Modules) {
		return // the common case, at every reconcile of every Kyma: nothing to note
	}
	before := make(map[string]v1beta2.ModuleStatus, len(previous))
	for _, ms := range previous {
		before[ms.Name] = ms
	}
	present := make(map[string]bool, len(kyma.Status.Modules))
	for i := range kyma.Status.Modules {
		ms := &kyma.Status.Modules[i]
		present[ms.Name] = true
		if ms.State != v1beta2.StateDeleting {
			ms.Removal = nil
			continue
		}
		ms.Removal = removalOf(kyma, ms, before[ms.Name].Removal, manifests[ManifestName(kyma.Name, ms.Name)], now)
	}
	for _, ms := range previous {
		if present[ms.Name] || ms.State != v1beta2.StateDeleting {
			continue
		}
		op := removalOf(kyma, &ms, ms.Removal, nil, now)
		op.Result, op.Code, op.FinishedAt = v1beta2.OperationReady, "", &now
		kyma.Status.Operations = append([]v1beta2.Operation{*op}, kyma.Status.Operations...)
	}
	if len(kyma.Status.Operations) > v1beta2.MaxKymaOperations {
		kyma.Status.Operations = kyma.Status.Operations[:v1beta2.MaxKymaOperations]
	}
}

// removalOf is the removal of the module of ms: its Manifest's record when
// the Manifest has one, else the one the Kyma started, else a new one.
func removalOf(kyma *v1beta2.Kyma, ms *v1beta2.ModuleStatus, last *v1beta2.Operation, m *v1beta2.Manifest, now metav1.Time) *v1beta2.Operation {
	var op v1beta2.Operation
	switch {
	case m != nil && len(m.Status.Operations) > 0 && isRemoval(m.Status.Operations[0].Type):
		op = m.Status.Operations[0]
	case last != nil:
		op = *last
	default:
		op = v1beta2.Operation{Type: v1beta2.OperationRemoval, FromVersion: installedOf(m, ms.Version), StartedAt: now, Result: v1beta2.OperationInProgress}
		if !kyma.DeletionTimestamp.IsZero() {
			op.Type = v1beta2.OperationDeletion
		}
	}
	op.Module = ms.Name
	return &op
}

// installedOf is the version the Manifest's history says is installed (the
// status entry may show a version that never got there), else otherwise.
func installedOf(m *v1beta2.Manifest, otherwise string) string {
	if m != nil {
		for _, op := range m.Status.Operations {
			if op.Result == v1beta2.OperationReady && op.ToVersion != "" {
				return op.ToVersion
			}
		}
	}
	return otherwise
}

func anyDeleting(modules []v1beta2.ModuleStatus) bool {
	for i := range modules {
		if modules[i].State == v1beta2.StateDeleting {
			return true
		}
	}
	return false
}

func isRemoval(t v1beta2.OperationType) bool {
	return t == v1beta2.OperationRemoval || t == v1beta2.OperationDeletion
}

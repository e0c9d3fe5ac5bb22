package kyma

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// Removals in the operation history (SPEC G4). A module's operations live
// in its Manifest's status, which goes when the module is removed; so the
// Kyma keeps each removal: while it is under way on the module's status
// entry (status.modules[].removal, the Manifest's own record once it has
// one), and once the module is gone in status.operations, Ready.
//
// A removal is never caught only as a passing state. The Kyma reconcile
// deletes a module's Manifest only once a status write has stored the
// removal on the module's entry (removalNoted), and creates a module's
// Manifest only once no removal is stored for it; a stored removal leaves
// the entry only by moving to status.operations, in the status write that
// sees the Manifest gone. Every status write is made with an optimistic
// lock on what the reconcile read, so the removal is recorded exactly once,
// however reconciles coalesce, fail or restart in between.

// removalStep is how soon a Kyma whose reconcile stored a removal and left
// its Manifest alone (to delete it, or to create the module's new one, once
// the status write is read back) is looked at again.
const removalStep = 100 * time.Millisecond

// removalNoted says whether the stored status carries the removal of the
// module: its Manifest may be deleted, and no new one may be created until
// the removal is recorded as done.
func removalNoted(stored []v1beta2.ModuleStatus, module string) bool {
	for i := range stored {
		if stored[i].Name == module {
			return stored[i].Removal != nil
		}
	}
	return false
}

// noteRemovals fills the removal of every module being deleted in
// kyma.Status.Modules, and moves each removal that previous carried into
// kyma.Status.Operations, at now, once its Manifest is gone from
// manifests. A removal whose module is not being deleted and whose
// Manifest is still there never began (the module was asked for again
// before its Manifest was deleted): it is dropped.
func noteRemovals(kyma *v1beta2.Kyma, previous []v1beta2.ModuleStatus, manifests map[string]*v1beta2.Manifest, now metav1.Time) {
	if !anyRemoval(previous) && !anyDeleting(kyma.Status.Modules) {
		return // the common case, at every reconcile of every Kyma: nothing to note
	}
	before := make(map[string]v1beta2.ModuleStatus, len(previous))
	for _, ms := range previous {
		before[ms.Name] = ms
	}
	deleting := make(map[string]bool, len(kyma.Status.Modules))
	for i := range kyma.Status.Modules {
		ms := &kyma.Status.Modules[i]
		if ms.State != v1beta2.StateDeleting {
			ms.Removal = nil
			continue
		}
		deleting[ms.Name] = true
		ms.Removal = removalOf(kyma, ms, before[ms.Name].Removal, manifests[ManifestName(kyma.Name, ms.Name)], now)
	}
	for _, ms := range previous {
		if deleting[ms.Name] || !removing(ms) || manifests[ManifestName(kyma.Name, ms.Name)] != nil {
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

func anyRemoval(modules []v1beta2.ModuleStatus) bool {
	for i := range modules {
		if removing(modules[i]) {
			return true
		}
	}
	return false
}

// removing says whether a stored entry is a removal under way: it carries
// the removal, or, written before removals were kept, it is Deleting.
func removing(ms v1beta2.ModuleStatus) bool {
	return ms.Removal != nil || ms.State == v1beta2.StateDeleting
}

func isRemoval(t v1beta2.OperationType) bool {
	return t == v1beta2.OperationRemoval || t == v1beta2.OperationDeletion
}

// soonest brings o's next look forward to within after, unless o backs off
// on an error or is stalled: those wait as they say.
func soonest(o reconciler.Outcome, after time.Duration) reconciler.Outcome {
	if o.Kind == reconciler.KindStalled || o.Kind == reconciler.KindRetry && o.After <= 0 {
		return o
	}
	if o.After <= 0 || after < o.After {
		o.After = after
	}
	return o
}

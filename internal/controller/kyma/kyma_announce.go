package kyma

import (
	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// ReasonReconcileStarted (Ready=False, Reconciling=True, state Processing):
// the operator took the Kyma on and is connecting to its runtime and
// resolving its modules; the next status says how they stand.
const ReasonReconcileStarted = "ReconcileStarted"

// announce is the Kyma's first status, written before its first reconcile
// does anything (reconciler.Phases.Announce): that reconcile connects to
// the runtime, installs CRDs there and pins module content, which takes
// seconds on a new runtime, and the Kyma's owner should see at once that
// the operator has it. A Kyma with any status has been announced.
func announce(kyma *v1beta2.Kyma) (reconciler.Outcome, bool) {
	return reconciler.Progressing(ReasonReconcileStarted, "The operator is connecting to the runtime and resolving the modules", 0),
		kyma.Status.State == ""
}

package kyma

import (
	"errors"
	"fmt"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/kubeconfig"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// Condition types of a Kyma besides the kstatus ones (v1beta2.ConditionReady,
// ConditionReconciling, ConditionStalled), which the reconciler skeleton
// writes.
const (
	// ConditionReady is v1beta2.ConditionReady: True when every module is
	// Ready, Warning or Unmanaged and the runtime is reachable.
	ConditionReady = v1beta2.ConditionReady
	// ConditionPaused is True while reconciliation is skipped (the
	// skip-reconciliation label or the pause selector). A paused Kyma is
	// still deleted when it is being deleted.
	ConditionPaused = "Paused"
	// ConditionFieldsIgnored is True while a module of the Kyma, or of the
	// runtime's Kyma, sets a field that is accepted for compatibility with
	// the Kyma lifecycle-manager API and has no effect here
	// (kyma_ignored.go); absent otherwise. kstatus does not read it: the
	// Kyma's health does not depend on it.
	ConditionFieldsIgnored = "FieldsIgnored"
)

// Reasons of the Kyma's Ready (and Stalled) condition. Stable: dashboards
// and alerts key on them. A module name is never a reason; module detail is
// in status.modules.
const (
	// ReasonReady: every module is Ready (or Unmanaged).
	ReasonReady = "Ready"
	// ReasonModulesNotReady: modules are still being installed, upgraded or
	// removed; the operator looks again soon by itself.
	ReasonModulesNotReady = "ModulesNotReady"
	// ReasonModulesFailed: a module is in Error (its message in
	// status.modules says why), or writing a module's Manifest failed. The
	// Kyma is retried by itself.
	ReasonModulesFailed = "ModulesFailed"
	// ReasonRuntimeUnavailable: the runtime cannot be reached or used, or
	// its kubeconfig Secret is missing or holds no kubeconfig. Retried with
	// backoff; nothing is uninstalled meanwhile.
	ReasonRuntimeUnavailable = "RuntimeUnavailable"
	// ReasonKubeconfigRefused: the runtime's kubeconfig asks for more than
	// inline credentials (a plugin, a file, a proxy, skipped TLS
	// verification). Stalled: nothing is tried until its Secret changes.
	ReasonKubeconfigRefused = "KubeconfigRefused"
	// ReasonRuntimeKymaRecreating: the runtime's owner deleted the runtime's
	// Kyma; it is being created again with the modules they had listed.
	ReasonRuntimeKymaRecreating = "RuntimeKymaRecreating"
	// ReasonReadFailed: reading the Kyma's Manifests or the module catalog
	// in the control plane failed; retried with backoff.
	ReasonReadFailed = "ReadFailed"
	// ReasonDeleting: the Kyma is being deleted and its modules are being
	// removed from the runtime; status.modules names what blocks.
	ReasonDeleting = v1beta2.ReasonDeleting
	// ReasonPaused is the reason of the Paused condition.
	ReasonPaused = "SkipReconciliationLabel"
	// ReasonHibernated is the reason of the Paused condition while the
	// Kyma's hibernation schedule says it sleeps.
	ReasonHibernated = "Hibernated"
)

// observed is what a Kyma's outcome is computed from.
type observed struct {
	// Modules is status.modules as computed for this reconcile.
	Modules []v1beta2.ModuleStatus
	// RuntimeErr is the failure to read or write the runtime, if any.
	RuntimeErr error
	// WriteErr is the failure to write (or pin the links of) a Manifest.
	WriteErr error
	// Recreating says the runtime's Kyma is being created again.
	Recreating bool
}

// outcomeOf is the Kyma's outcome: the runtime first (a refused kubeconfig
// is Stalled, an unusable runtime a Retry with backoff), then our own
// failed writes (Retry with backoff), then the modules: any Error is a
// Retry looked at again at the Error interval (the Manifest's controller
// works on it, so backing off would only notice its recovery later), any
// module still installing or being removed Progressing, any Warning
// Warning, else Ready. It reads nothing but its arguments.
func outcomeOf(kyma *v1beta2.Kyma, in observed, iv requeue.Intervals) reconciler.Outcome {
	if in.RuntimeErr != nil {
		o := runtimeOutcome(kyma, in.RuntimeErr)
		if o.Kind == reconciler.KindStalled && in.WriteErr != nil {
			// Stalled on the runtime, but our own writes still need a retry.
			o.After = iv.After(v1beta2.StateError)
		}
		return o
	}
	if in.WriteErr != nil {
		return reconciler.Retry(ReasonModulesFailed,
			fmt.Sprintf("Updating the modules' Manifests failed (%s); see status.modules and the Kyma's events", reconciler.Cause(in.WriteErr)),
			in.WriteErr)
	}
	c := countStates(in.Modules)
	total := len(in.Modules)
	switch {
	case c.failed > 0:
		return reconciler.RetryAfter(ReasonModulesFailed,
			fmt.Sprintf("%d of %d modules are in Error; see status.modules", c.failed, total),
			iv.After(v1beta2.StateError), nil)
	case c.progressing > 0 || c.removing > 0:
		message := fmt.Sprintf("%d of %d modules are not ready yet", c.progressing+c.removing, total)
		if c.removing > 0 {
			message += fmt.Sprintf(", %d being removed", c.removing)
		}
		return reconciler.Progressing(ReasonModulesNotReady, message+"; see status.modules", iv.After(v1beta2.StateProcessing))
	case in.Recreating:
		return reconciler.Progressing(ReasonRuntimeKymaRecreating,
			"The runtime's Kyma was deleted in the runtime and is being created again", iv.After(v1beta2.StateProcessing))
	case c.warning > 0:
		return reconciler.Warning(fmt.Sprintf("%d of %d modules report a warning; see status.modules", c.warning, total),
			iv.After(v1beta2.StateWarning))
	case total == 0:
		return reconciler.Ready(ReasonReady, "No modules to install", iv.After(v1beta2.StateReady))
	default:
		return reconciler.Ready(ReasonReady, "All modules are ready", iv.After(v1beta2.StateReady))
	}
}

type stateCounts struct{ failed, progressing, removing, warning int }

func countStates(modules []v1beta2.ModuleStatus) stateCounts {
	var c stateCounts
	for _, m := range modules {
		switch m.State {
		case v1beta2.StateReady, v1beta2.StateUnmanaged:
		case v1beta2.StateError:
			c.failed++
		case v1beta2.StateDeleting:
			c.removing++
		case v1beta2.StateWarning:
			c.warning++
		default:
			c.progressing++
		}
	}
	return c
}

// runtimeOutcome says what a failure to use the Kyma's runtime means. The
// messages are stable and say what to do; the error's own text goes to
// events. The one exception is a refused kubeconfig: its message is built
// by internal/kubeconfig and internal/remote from the Secret's name, the
// refused fields and their fix, never from a value of the kubeconfig, and
// it only changes when the Secret does.
func runtimeOutcome(kyma *v1beta2.Kyma, err error) reconciler.Outcome {
	secret := fmt.Sprintf("the Secret in namespace %s labelled %s=%s", kyma.Namespace, v1beta2.KymaNameLabel, kyma.Name)
	switch {
	case errors.Is(err, remote.ErrKubeconfigRefused):
		return reconciler.Stalled(ReasonKubeconfigRefused, err.Error(), err)
	case errors.Is(err, remote.ErrNoKubeconfigSecret):
		return reconciler.Retry(ReasonRuntimeUnavailable,
			fmt.Sprintf("There is no kubeconfig Secret for this runtime: create %s, with the kubeconfig under key %q",
				secret, remote.KubeconfigKey), err)
	case errors.Is(err, kubeconfig.ErrUnparsable):
		return reconciler.Retry(ReasonRuntimeUnavailable,
			fmt.Sprintf("The runtime's kubeconfig %s: put a kubeconfig under key %q of %s",
				kubeconfig.ErrUnparsable, remote.KubeconfigKey, secret), err)
	case errors.Is(err, remote.ErrInvalidKubeconfig):
		return reconciler.Retry(ReasonRuntimeUnavailable,
			fmt.Sprintf("The runtime's kubeconfig Secret is not usable (see the Kyma's events): keep exactly one, %s, with a kubeconfig under key %q",
				secret, remote.KubeconfigKey), err)
	default:
		return reconciler.Retry(ReasonRuntimeUnavailable,
			fmt.Sprintf("The runtime cannot be reached or used (%s); retrying, nothing is uninstalled meanwhile", reconciler.Cause(err)), err)
	}
}

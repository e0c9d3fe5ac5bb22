package controller

import (
	"errors"

	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Reasons of the agent controller's outcomes. The Kyma's status belongs to
// the Kyma controller, so they are never written there: they name the events
// on the Kyma (Warning for failures, with the raw error, at most once a
// minute per Kyma and reason) and label nothing else. Each starts with
// "Watcher", as other controllers report on the same Kyma.
const (
	// ReasonConfigured: the agent, its certificates and the webhook
	// configuration are in place (also the Normal event when something
	// changed).
	ReasonConfigured = "WatcherConfigured"
	// ReasonCertificateIssued: a Normal event, certificates were (re)issued.
	ReasonCertificateIssued = "WatcherCertificateIssued"
	// ReasonNoRuntimeID: the Kyma has no runtime id label, so there is no
	// identity to issue a certificate for; labelling it starts the watcher.
	ReasonNoRuntimeID = "WatcherNoRuntimeID"
	// ReasonReportingPaused: reporting is paused for the runtime
	// (watcher-paused label or --watcher-paused-selector); the webhook
	// configuration is removed, certificates are still renewed.
	ReasonReportingPaused = "WatcherReportingPaused"
	// ReasonWaitingForKubeconfig: no kubeconfig Secret registers the runtime
	// yet; its creation starts the watcher.
	ReasonWaitingForKubeconfig = "WatcherWaitingForKubeconfig"
	// ReasonKubeconfigRefused: the runtime's kubeconfig Secret is refused
	// (see docs/security.md); nothing is retried until the Secret changes.
	ReasonKubeconfigRefused = "WatcherKubeconfigRefused"
	// ReasonRuntimeUnavailable: the runtime could not be reached or refused
	// the credentials; retried with backoff.
	ReasonRuntimeUnavailable = "WatcherRuntimeUnavailable"
	// ReasonApplyFailed: the runtime refused the agent's resources; retried
	// with backoff.
	ReasonApplyFailed = "WatcherApplyFailed"
	// ReasonRemovalFailed: removing the webhook configuration or the agent
	// failed; retried with backoff.
	ReasonRemovalFailed = "WatcherRemovalFailed"
	// ReasonControlPlaneFailed: reading or writing the control plane failed
	// (the runtime's certificates in the PKI namespace, the Watchers);
	// retried with backoff.
	ReasonControlPlaneFailed = "WatcherControlPlaneFailed"
)

// runtimeFailure is the outcome of err from working on a runtime: a refused
// kubeconfig waits for the Secret to change, an unreachable runtime or
// refused credentials are retried as ReasonRuntimeUnavailable, anything else
// is retried under reason with the message failed. Messages carry the error's
// class (reconciler.Cause), never its text.
func runtimeFailure(err error, reason, failed string) reconciler.Outcome {
	cause := " (" + reconciler.Cause(err) + ")"
	switch {
	case errors.Is(err, remote.ErrInvalidKubeconfig):
		return reconciler.Stalled(ReasonKubeconfigRefused,
			"The runtime's kubeconfig Secret is refused; fix the Secret (the Kyma's events and its Ready condition say what is wrong)", err)
	case remote.IsConnectionError(err):
		return reconciler.Retry(ReasonRuntimeUnavailable, "The runtime cannot be reached or refuses the credentials"+cause, err)
	default:
		return reconciler.Retry(reason, failed+cause, err)
	}
}

// unreachable reports whether err means that the runtime cannot be worked on
// at all (no or a refused kubeconfig, no connection), so that removing the
// watcher from it is not waited for.
func unreachable(err error) bool {
	return errors.Is(err, remote.ErrNoKubeconfigSecret) || errors.Is(err, remote.ErrInvalidKubeconfig) || remote.IsConnectionError(err)
}

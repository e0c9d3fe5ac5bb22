package v1beta2

// Condition types every kind of this API carries in status.conditions. They
// follow kstatus (sigs.k8s.io/cli-utils/pkg/kstatus): Ready is the summary
// that `kubectl wait --for=condition=Ready` and health checks read;
// Reconciling and Stalled are "abnormal-true": present and True only while
// the operator is working on the object, or has given up until an input
// changes. status.state (Ready, Processing, Error, Deleting, Warning) is
// derived from them, for KLM compatibility.
const (
	// ConditionReady is True when the object is in its desired state.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator works towards the
	// desired state: progressing, waiting for something, or retrying after
	// a transient failure (reason ProgressingWithRetry).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the operator cannot make progress
	// without a change of its inputs; nothing is retried until one changes.
	ConditionStalled = "Stalled"
)

// Reasons of the Reconciling condition shared by every kind.
const (
	// ReasonProgressing: the operator is working towards the desired state.
	ReasonProgressing = "Progressing"
	// ReasonProgressingWithRetry: the last attempt failed with an error the
	// operator retries by itself, with backoff.
	ReasonProgressingWithRetry = "ProgressingWithRetry"
	// ReasonDeleting: the object is being deleted and the operator is
	// removing what it installed.
	ReasonDeleting = "Deleting"
)

// ReasonWarning is the reason of a Ready=True condition whose object works
// with a warning the message names; status.state is then Warning.
const ReasonWarning = "Warning"

// MaxMessageLength bounds, in characters, the messages the operator writes
// into status: every condition message, and a Kyma's
// status.modules[].message. Longer text, such as a module's own status
// message read from the runtime or an error that quotes what others wrote,
// is cut with a marker; without a bound one such text could make a status
// too large to write. The bound is the writer's, not the CRD's: a status
// written by the Kyma lifecycle-manager, which has none, must still apply.
const MaxMessageLength = 1024

// ConditionWatcherReporting is a Kyma's liveness as its runtime's watcher
// agent shows it: True while the agent reports or sends heartbeats, False
// (reason WatcherSilent) once it has been silent longer than the operator's
// timeout, absent when the runtime has no agent. The operator writes it
// only when it changes, so its lastTransitionTime says since when; a
// reader that shows liveness (lmctl, the console) shows a runtime whose
// condition is False, or whose Ready condition says the runtime cannot be
// reached, as unknown with that age, never as Ready.
const ConditionWatcherReporting = "WatcherReporting"

// Reasons of the WatcherReporting condition.
const (
	// ReasonWatcherHeard: the agent reported or sent a heartbeat within
	// the timeout.
	ReasonWatcherHeard = "WatcherHeard"
	// ReasonWatcherSilent: nothing from the agent for longer than the
	// timeout.
	ReasonWatcherSilent = "WatcherSilent"
)

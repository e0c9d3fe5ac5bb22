// Package reconciler is the one shape every controller here has (STYLE.md
// rule 1): get the object; deletion, else pause, else the finalizer; the
// controller's phases, each ending in a typed Outcome; one status
// computation from that Outcome and one status patch with an optimistic
// lock. It owns the kstatus conditions (Ready, Reconciling, Stalled), the
// status.state derived from them, and what each kind of outcome means for
// requeueing, so that no controller decides these on its own.
package reconciler

import (
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Kind says what an Outcome means for the object and for requeueing.
type Kind int

const (
	// KindReady means the desired state is reached. Ready=True.
	KindReady Kind = iota
	// KindWarning means the desired state is reached and works, with a warning
	// the message names. Ready=True, reason Warning; state Warning.
	KindWarning
	// KindProgressing means work is under way or the operator waits for
	// something that is expected to happen by itself. Ready=False,
	// Reconciling=True; state Processing; requeued after Outcome.After.
	KindProgressing
	// KindRetry means a transient failure. Ready=False, Reconciling=True
	// (ProgressingWithRetry); state Error; retried with backoff.
	KindRetry
	// KindStalled means a failure only a change of the inputs can fix.
	// Ready=False, Stalled=True; state Error; not retried (a watched input
	// changing requeues it).
	KindStalled
	// KindDeleting means the object is being deleted and removal is under way.
	// Ready=False, Reconciling=True (Deleting); state Deleting.
	KindDeleting
	// KindDone means deletion finished; the finalizer may go. Nothing is
	// recorded.
	KindDone
	// KindConflict means the object changed under the reconcile (optimistic
	// lock). Nothing is recorded; requeued quickly and quietly.
	KindConflict
	// KindPaused means the object is paused; only the pause is recorded, and
	// nothing is requeued (unpausing is a change that requeues it) unless
	// the pause ends by itself after After (a hibernation's wake).
	KindPaused
)

// Outcome is how one reconcile ended. Reason is a stable PascalCase word
// and Message a stable sentence that says what to do; raw error text goes
// only to Err, which reaches events and logs, never conditions.
type Outcome struct {
	Kind    Kind
	Reason  string
	Message string
	// After requeues a Ready, Warning, Progressing, Deleting or Stalled
	// outcome after this long; zero means not at all (Stalled normally
	// waits for an input to change). On a Retry it replaces the backoff.
	After time.Duration
	// Err is the failure behind a Retry or Stalled outcome.
	Err error
}

// Ready is a reached desired state, looked at again after `after`.
func Ready(reason, message string, after time.Duration) Outcome {
	return Outcome{Kind: KindReady, Reason: reason, Message: message, After: after}
}

// Warning is a reached desired state that works with a warning; its Ready
// condition carries reason v1beta2.ReasonWarning.
func Warning(message string, after time.Duration) Outcome {
	return Outcome{Kind: KindWarning, Reason: v1beta2.ReasonWarning, Message: message, After: after}
}

// Progressing is work under way, looked at again after `after`.
func Progressing(reason, message string, after time.Duration) Outcome {
	return Outcome{Kind: KindProgressing, Reason: reason, Message: message, After: after}
}

// Retry is a transient failure, retried with backoff.
func Retry(reason, message string, err error) Outcome {
	if err == nil {
		err = errors.New(message)
	}
	return Outcome{Kind: KindRetry, Reason: reason, Message: message, Err: err}
}

// RetryAfter is a failure that something else is working on, looked at
// again after `after` instead of with backoff: a Kyma whose module's
// Manifest is in Error waits for the Manifest's own controller, and backing
// off would only delay noticing that it recovered. Its Err, when set, is
// reported like any other.
func RetryAfter(reason, message string, after time.Duration, err error) Outcome {
	return Outcome{Kind: KindRetry, Reason: reason, Message: message, After: after, Err: err}
}

// Stalled is a failure only a change of the inputs can fix.
func Stalled(reason, message string, err error) Outcome {
	return Outcome{Kind: KindStalled, Reason: reason, Message: message, Err: err}
}

// Deleting is a removal under way, looked at again after `after`.
func Deleting(reason, message string, after time.Duration) Outcome {
	return Outcome{Kind: KindDeleting, Reason: reason, Message: message, After: after}
}

// Done is a finished deletion.
func Done() Outcome { return Outcome{Kind: KindDone} }

// Conflict is an object that changed under the reconcile.
func Conflict(err error) Outcome { return Outcome{Kind: KindConflict, Err: err} }

// conflictRequeue is how soon an object that changed under a reconcile is
// looked at again. A change by someone else normally requeues it first; the
// usual conflict is with the reconcile's own previous status write, which
// the cache had not yet seen (a module woken the moment its objects change
// in the runtime is reconciled again within milliseconds) and which starts
// no reconcile: the cache has it a few milliseconds later.
const conflictRequeue = 200 * time.Millisecond

// Result is what controller-runtime needs to hear about o: a Retry returns
// its error (backoff) unless it names its own After (RetryAfter), a Stalled
// one a TerminalError (no retry), a Conflict a quiet short requeue, the
// rest their After.
func (o Outcome) Result() (ctrl.Result, error) {
	switch o.Kind {
	case KindRetry:
		if o.After > 0 {
			return ctrl.Result{RequeueAfter: o.After}, nil
		}
		return ctrl.Result{}, o.Err
	case KindStalled:
		if o.After > 0 {
			return ctrl.Result{RequeueAfter: o.After}, nil
		}
		err := o.Err
		if err == nil {
			err = errors.New(o.Message)
		}
		return ctrl.Result{}, reconcile.TerminalError(err)
	case KindConflict:
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	case KindDone:
		return ctrl.Result{}, nil
	case KindPaused:
		return ctrl.Result{RequeueAfter: o.After}, nil
	default:
		return ctrl.Result{RequeueAfter: o.After}, nil
	}
}

// State is the KLM-compatible status.state an outcome stands for.
func (o Outcome) State() v1beta2.State {
	switch o.Kind {
	case KindReady:
		return v1beta2.StateReady
	case KindWarning:
		return v1beta2.StateWarning
	case KindProgressing:
		return v1beta2.StateProcessing
	case KindDeleting, KindDone:
		return v1beta2.StateDeleting
	default:
		return v1beta2.StateError
	}
}

// Records reports whether the outcome is written to status at all.
func (o Outcome) Records() bool {
	return o.Kind != KindDone && o.Kind != KindConflict && o.Kind != KindPaused
}

// metricState labels the outcome in the requeue metric.
func (o Outcome) metricState() v1beta2.State {
	switch o.Kind {
	case KindPaused:
		return "Paused"
	case KindConflict:
		return "Conflict"
	default:
		return o.State()
	}
}

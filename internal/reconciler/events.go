package reconciler

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/redact"
)

// eventInterval is how often the same failure of the same object is
// reported as an event at most: a runtime that stays down for an hour must
// not write an event per retry.
const eventInterval = time.Minute

// Events reports the raw error text of failed reconciles as Warning events,
// which is where raw text belongs (conditions carry stable messages only),
// with credentials in quoted URLs removed, at most once per eventInterval
// per object and reason.
type Events struct {
	recorder events.EventRecorder
	now      func() time.Time

	mu   sync.Mutex
	last map[eventKey]time.Time
}

type eventKey struct {
	uid    types.UID
	reason string
	// message is the condition message of the outcome, when the event
	// reports one: a failure of another class (another stable message)
	// under the same reason is news, and is reported at once.
	message string
}

// NewEvents reports through recorder; a nil recorder reports nothing.
func NewEvents(recorder events.EventRecorder) *Events {
	return &Events{recorder: recorder, now: time.Now, last: map[eventKey]time.Time{}}
}

// Warn reports err for obj under reason, unless the same was reported
// within eventInterval.
func (e *Events) Warn(obj client.Object, reason string, err error) {
	if e == nil || e.recorder == nil || err == nil {
		return
	}
	if !e.due(eventKey{uid: obj.GetUID(), reason: reason}) {
		return
	}
	e.warn(obj, reason, err)
}

// warnOutcome reports o's error for obj, at most once per eventInterval for
// the same reason and condition message.
func (e *Events) warnOutcome(obj client.Object, o Outcome) {
	if e == nil || e.recorder == nil || o.Err == nil {
		return
	}
	if !e.due(eventKey{uid: obj.GetUID(), reason: o.Reason, message: o.Message}) {
		return
	}
	e.warn(obj, o.Reason, o.Err)
}

// warn writes the event. The raw text may quote links module teams wrote,
// with credentials in them (user info, a token in the query): those are
// stripped here, for every controller at once.
func (e *Events) warn(obj client.Object, reason string, err error) {
	e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, reason, "%s", redact.Text(err.Error()))
}

// Normal reports something that happened; these are not rate limited, as
// each one is a change.
func (e *Events) Normal(obj client.Object, reason, note string) {
	if e == nil || e.recorder == nil {
		return
	}
	e.recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, reason, "%s", note)
}

// Warning reports something the operator did that people must know of
// (it acted on its own authority); like Normal, not rate limited, as each
// one is an act.
func (e *Events) Warning(obj client.Object, reason, note string) {
	if e == nil || e.recorder == nil {
		return
	}
	e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, reason, "%s", note)
}

func (e *Events) due(key eventKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if last, ok := e.last[key]; ok && now.Sub(last) < eventInterval {
		return false
	}
	if len(e.last) > 10000 {
		e.forgetOlderThan(now.Add(-eventInterval))
	}
	e.last[key] = now
	return true
}

// forgetOlderThan keeps the memory bounded on a large fleet.
func (e *Events) forgetOlderThan(t time.Time) {
	for k, at := range e.last {
		if at.Before(t) {
			delete(e.last, k)
		}
	}
}

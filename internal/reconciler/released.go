package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// released is the set of objects, by UID and finalizer, whose finalizer
// this process removed after their Delete phase finished. The finalizer
// is part of the key: several controllers finalize one object (the Kyma
// controller and the watcher's), and one's release says nothing of the
// other's. A cached client may still
// hand out such an object, being deleted and carrying the finalizer, for a
// moment after the patch: a reconcile queued meanwhile would run Delete
// again on a past state, and write to the runtime what the finished one
// had removed (the module's identity, say), with nothing left to remove it
// again once the object is gone. A UID names one object for ever, and no
// finalizer can be added to an object being deleted, so an object once
// released has nothing left for that controller's Delete phase to do.
var released = releasedObjects{}

// releasedFor is how long a release is remembered at least (and twice that
// at most): far longer than any cache lags behind its API server.
const releasedFor = 5 * time.Minute

// releasedObjects keeps two generations, so that forgetting costs nothing
// per object: the older one is dropped whole when the newer one has been
// filled for releasedFor.
type releasedObjects struct {
	mu            sync.Mutex
	since         time.Time
	recent, older map[releasedKey]struct{}
}

type releasedKey struct {
	uid       types.UID
	finalizer string
}

func (r *releasedObjects) add(uid types.UID, finalizer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); r.recent == nil || now.Sub(r.since) > releasedFor {
		r.older, r.recent, r.since = r.recent, map[releasedKey]struct{}{}, now
	}
	r.recent[releasedKey{uid, finalizer}] = struct{}{}
}

func (r *releasedObjects) has(uid types.UID, finalizer string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := releasedKey{uid, finalizer}
	_, recent := r.recent[key]
	_, older := r.older[key]
	return recent || older
}

package reconciler

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// written remembers, by UID, the resourceVersion of the last status this
// process wrote to each object, for a short while. A reconcile that starts
// within milliseconds of the previous one's status write (a module woken
// the moment its manager or custom resource changes in the runtime) may be
// handed a cached copy from before that write: its status would not
// describe what is applied, and the reconcile would redo the whole apply,
// then lose its own status write to a conflict. Such a reconcile waits a
// moment for the cache instead (Run).
var written = writtenVersions{}

// writtenFor is how long a write is remembered at least (and twice that at
// most): far longer than a cache lags behind its API server.
const writtenFor = 10 * time.Second

// staleRequeue is how soon a reconcile handed a copy older than its own
// last write looks again.
const staleRequeue = 50 * time.Millisecond

// writtenVersions keeps two generations, so that forgetting costs nothing
// per object (as releasedObjects).
type writtenVersions struct {
	mu            sync.Mutex
	since         time.Time
	recent, older map[types.UID]uint64
}

// add records that this process wrote the object uid at resourceVersion.
// A resourceVersion that is not a number (an API server not backed by
// etcd) is not recorded: the versions cannot be ordered.
func (w *writtenVersions) add(uid types.UID, resourceVersion string) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil || uid == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if now := time.Now(); w.recent == nil || now.Sub(w.since) > writtenFor {
		w.older, w.recent, w.since = w.recent, map[types.UID]uint64{}, now
	}
	w.recent[uid] = rv
}

// newer says whether this process wrote the object uid at a later version
// than resourceVersion, the version of a copy about to be reconciled. The
// API server's resourceVersions are etcd revisions, which grow; one that is
// not a number is never older.
func (w *writtenVersions) newer(uid types.UID, resourceVersion string) bool {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.recent[uid]
	if !ok {
		last, ok = w.older[uid]
	}
	return ok && last > rv
}

package remote

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NewKindHold is how long after a CRD became Established the runtime's API
// server holds a create (POST) of an object of its kind, before serving it:
// the apiextensions server sleeps 2 s in such a request, so that every
// server of an HA control plane has seen the CRD before a client reads the
// object back. A server-side apply is not held.
const NewKindHold = 2 * time.Second

// KindsEstablished records that the CRDs of kinds were seen Established at
// at, so that CreateHeld can tell a reconcile about to create an object of
// one of them to wait out the hold without its worker, instead of inside
// the API server's request. Records older than the hold are dropped.
func (c *Cluster) KindsEstablished(kinds []schema.GroupKind, at time.Time) {
	if len(kinds) == 0 {
		return
	}
	k := c.known
	k.mu.Lock()
	defer k.mu.Unlock()
	for kind, seen := range k.established {
		if at.Sub(seen) >= NewKindHold {
			delete(k.established, kind)
		}
	}
	if k.established == nil {
		k.established = map[schema.GroupKind]time.Time{}
	}
	for _, kind := range kinds {
		k.established[kind] = at
	}
}

// CreateHeld is how much longer, at now, the runtime's API server would hold
// a create of an object of kind: zero unless its CRD was recorded
// Established (KindsEstablished) less than NewKindHold ago. Measured from
// when the operator saw the CRD Established, which is after the API server
// set the condition, so that a create after the wait is not held.
func (c *Cluster) CreateHeld(kind schema.GroupKind, now time.Time) time.Duration {
	k := c.known
	k.mu.Lock()
	defer k.mu.Unlock()
	seen, ok := k.established[kind]
	if !ok {
		return 0
	}
	return max(0, NewKindHold-now.Sub(seen))
}

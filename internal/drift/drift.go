// Package drift remembers, per Manifest, what a full reconcile last verified
// in the runtime, so that the periodic drift check of an unchanged module
// costs a cheap read instead of a render and a dry-run apply of every object.
//
// The memory is the operator's own, never the Manifest's status: an idle
// fleet must write nothing to the control plane. It is lost on restart,
// which costs one full check per Manifest and nothing else.
package drift

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Fingerprint is what a full reconcile verified: the Manifest as it was
// (generation, labels and annotations, inventory), the runtime it went to,
// and the Version of each of its objects there. Content is pinned by digest
// in the Manifest's spec, so the generation covers it. Digests stand for
// the inventory and the versions, so that a fleet's memory stays small.
type Fingerprint struct {
	Runtime    remote.Identity
	Generation int64
	// Meta is a digest of the Manifest's labels and annotations, which
	// steer rendering (the debug label) and ownership (the Kyma's name).
	Meta string
	// Inventory digests the Manifest's status.synced.
	Inventory string
	// Versions digests the inventory's objects at the verified Versions.
	Versions string
	// At is when the fingerprint was taken, after every write of the apply
	// it describes: a listing taken later shows whatever was written to the
	// objects since (Listings).
	At time.Time
}

// Of is the fingerprint of manifest as applied to runtime, with its objects
// at versions; false when versions lack an object of the inventory.
func Of(manifest *v1beta2.Manifest, runtime remote.Identity, versions apply.Versions) (Fingerprint, bool) {
	digest, ok := versions.Digest(manifest.Status.Synced)
	if !ok {
		return Fingerprint{}, false
	}
	return Fingerprint{
		Runtime:    runtime,
		Generation: manifest.Generation,
		Meta:       metaDigest(manifest),
		Inventory:  inventoryDigest(manifest.Status.Synced),
		Versions:   digest,
		At:         time.Now(),
	}, true
}

// Describes reports whether f was taken of this very Manifest (same
// generation, labels, annotations and inventory) in this very runtime: only
// then may the cheap read stand in for the full check.
func (f Fingerprint) Describes(manifest *v1beta2.Manifest, runtime remote.Identity) bool {
	return f.Runtime == runtime && f.Generation == manifest.Generation &&
		f.Meta == metaDigest(manifest) && f.Inventory == inventoryDigest(manifest.Status.Synced)
}

// Unchanged reports whether live, read now of the inventory f describes,
// shows every object at the Version the full check verified.
func (f Fingerprint) Unchanged(inventory []v1beta2.Resource, live apply.Versions) bool {
	digest, ok := live.Digest(inventory)
	return ok && digest == f.Versions
}

func inventoryDigest(inventory []v1beta2.Resource) string {
	h := sha256.New()
	for _, r := range inventory {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00", r.Group, r.Version, r.Kind, r.Namespace, r.Name)
	}
	return string(h.Sum(nil))
}

func metaDigest(manifest *v1beta2.Manifest) string {
	h := sha256.New()
	for _, m := range []map[string]string{manifest.Labels, manifest.Annotations} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			h.Write([]byte(k))
			h.Write([]byte{0})
			h.Write([]byte(m[k]))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return string(h.Sum(nil))
}

// Memory holds one Fingerprint per Manifest UID. The zero value is empty
// and ready; it is safe for concurrent use.
type Memory struct {
	mu   sync.Mutex
	byID map[types.UID]Fingerprint
}

// Remember stores f as what was verified of the Manifest uid.
func (m *Memory) Remember(uid types.UID, f Fingerprint) {
	m.mu.Lock()
	if m.byID == nil {
		m.byID = map[types.UID]Fingerprint{}
	}
	m.byID[uid] = f
	m.mu.Unlock()
}

// Recall returns what was verified of the Manifest uid, if anything.
func (m *Memory) Recall(uid types.UID) (Fingerprint, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.byID[uid]
	return f, ok
}

// Forget drops what was verified of the Manifest uid: its objects are being
// changed, or it is going away.
func (m *Memory) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.byID, uid)
	m.mu.Unlock()
}

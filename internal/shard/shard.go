// Package shard splits the fleet between operator processes (SPEC G8): each
// Kyma belongs to exactly one of Count shards, by a stable hash of its name,
// and a process of one shard neither sees nor touches the Kymas of another,
// nor their Manifests and kubeconfig Secrets. One leader per shard does the
// work (a Lease per shard), so that more replicas of a shard are standbys
// that take over within the Lease's duration.
//
// The hash is carried by a label (v1beta2.ShardBucketLabel), so that each
// shard's informers list and watch its own share only (cache.go), and each
// shard's leader writes the label on its own objects that lack it or carry
// a wrong one (label.go).
package shard

import (
	"fmt"
	"hash/fnv"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Shard is the part of the fleet one operator process works on. The zero
// value, and any Count of 1, is the whole fleet.
type Shard struct {
	// Count is how many shards the fleet is split into.
	Count int
	// ID is this process's shard, 0 ≤ ID < Count.
	ID int
}

// Validate says what is wrong with the flags that set s.
func (s Shard) Validate() error {
	switch {
	case s.Count < 0:
		return fmt.Errorf("--shards must be 1 or more, not %d", s.Count)
	case s.Count <= 1 && s.ID != 0:
		return fmt.Errorf("--shard-id %d needs --shards of more than %d", s.ID, s.ID)
	case s.Count > Buckets:
		return fmt.Errorf("--shards must be at most %d (the shard buckets a Kyma can be filed under), not %d", Buckets, s.Count)
	case s.ID < 0 || (s.Count > 1 && s.ID >= s.Count):
		return fmt.Errorf("--shard-id must be between 0 and %d (--shards %d), not %d", s.Count-1, s.Count, s.ID)
	}
	return nil
}

// Enabled says whether the fleet is split at all.
func (s Shard) Enabled() bool { return s.Count > 1 }

// Plans tells whether this process plans the fleet's rollouts: an
// unsharded one, or shard 0 (its leader, as every controller). One
// planner sees the whole fleet; every shard obeys its plan.
func (s Shard) Plans() bool { return !s.Enabled() || s.ID == 0 }

// Buckets is how many shard buckets Kymas are filed under. 840 is the least
// common multiple of 1 to 8, so that for those counts (and every other
// divisor of 840) a bucket modulo the count is FNV-1a of the name modulo
// the count: the shards of earlier versions, which hashed the name alone,
// agree with these. It is also the most shards there can be.
const Buckets = 840

// Bucket is the shard bucket of the Kyma of this name: FNV-1a of the name
// modulo Buckets. It does not depend on the count of shards, so that a
// change of the count moves Kymas between shards without a write.
func Bucket(kymaName string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(kymaName))
	return int(h.Sum32() % Buckets)
}

// Of is the shard a Kyma of this name belongs to among count: its Bucket
// modulo count, so that every process, of any version, agrees without
// talking.
func Of(kymaName string, count int) int {
	if count <= 1 {
		return 0
	}
	return Bucket(kymaName) % count
}

// OwnsKyma says whether the Kyma of this name is s's.
func (s Shard) OwnsKyma(name string) bool {
	return !s.Enabled() || Of(name, s.Count) == s.ID
}

// Owns says whether obj is s's: a Kyma by its name, an object labelled with
// a Kyma (its Manifests, its kubeconfig Secret) by that Kyma; every other
// object (the catalog, Watchers) belongs to all shards.
func (s Shard) Owns(obj any) bool {
	if !s.Enabled() {
		return true
	}
	name, ok := KymaOf(obj)
	return !ok || s.OwnsKyma(name)
}

// KymaOf is the name of the Kyma obj is or belongs to; false for an object
// of no Kyma. A tombstone of a deleted object answers for the object.
func KymaOf(obj any) (string, bool) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return "", false
	}
	if isKyma(o) {
		return o.GetName(), true
	}
	name, ok := o.GetLabels()[v1beta2.KymaNameLabel]
	return name, ok
}

func isKyma(o client.Object) bool {
	if _, ok := o.(*v1beta2.Kyma); ok {
		return true
	}
	gvk := o.GetObjectKind().GroupVersionKind()
	return gvk.Group == v1beta2.GroupVersion.Group && gvk.Kind == "Kyma"
}

// LeaseName is the leader-election Lease of s: base for the whole fleet (so
// that an unsharded operator keeps the Lease it always had), a Lease of its
// own per shard otherwise. The count is part of the name: processes started
// with another count never share a Lease with these.
func (s Shard) LeaseName(base string) string {
	if !s.Enabled() {
		return base
	}
	return fmt.Sprintf("%s-shard-%d-of-%d", base, s.ID, s.Count)
}

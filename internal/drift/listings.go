package drift

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Listings share the metadata Lists of the periodic check between the
// modules of one Kyma. Each module's check used to List its own objects, per
// kind and namespace: a Kyma of twenty modules whose objects share a few
// kinds in one namespace cost twenty Lists of those few kinds every Ready
// interval, which at a fleet's scale was most of an idle operator's CPU and
// of its runtimes' API servers'. The Manifests of a Kyma are checked at the
// same moment (requeue.Aligned), so one List of the Kyma's objects, kept for
// a short while, answers all of them.
//
// A listing answers a module's check only when it was taken after the
// module's fingerprint (Fingerprint.At): it then shows every write since
// the versions were verified. It is kept for ttl, and only the fields that
// ReadVersions reads.
type Listings struct {
	ttl    time.Duration
	flight singleflight.Group

	mu      sync.Mutex
	entries map[listingKey]listing
	// reported holds when a Kyma's runtime last reported a change (Forget),
	// for the last ttl: no listing taken before serves its checks.
	reported map[string]time.Time
	swept    time.Time
}

type listingKey struct {
	runtime   remote.Identity
	kyma      string
	gvk       schema.GroupVersionKind
	namespace string
}

type listing struct {
	at    time.Time
	items []metav1.PartialObjectMetadata
}

// NewListings returns Listings that keep each List for ttl.
func NewListings(ttl time.Duration) *Listings {
	return &Listings{ttl: ttl, entries: map[listingKey]listing{}, reported: map[string]time.Time{}}
}

// Lister lists the Kyma's objects in its runtime through list (an
// apply.KymaLister), answering from a listing taken after since and less
// than ttl ago when there is one. Concurrent checks of the Kyma share one
// request.
func (l *Listings) Lister(list apply.Lister, runtime remote.Identity, kyma string, since time.Time) apply.Lister {
	return func(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]metav1.PartialObjectMetadata, error) {
		key := listingKey{runtime: runtime, kyma: kyma, gvk: gvk, namespace: namespace}
		since := l.notBefore(kyma, since)
		if items, ok := l.recall(key, since, time.Now()); ok {
			return items, nil
		}
		fresh := func() (listing, error) {
			at := time.Now()
			items, err := list(ctx, gvk, namespace)
			if err != nil {
				return listing{}, err
			}
			e := listing{at: at, items: compact(items)}
			l.store(key, e)
			return e, nil
		}
		v, err, _ := l.flight.Do(fmt.Sprintf("%v\x00%s\x00%s\x00%s", runtime, kyma, gvk, namespace), func() (any, error) { return fresh() })
		if err != nil {
			return nil, err
		}
		e := v.(listing) //nolint:forcetypeassert // fresh returns a listing
		if !e.at.After(since) {
			// A List already on its way when the module was verified.
			if e, err = fresh(); err != nil {
				return nil, err
			}
		}
		return e.items, nil
	}
}

// notBefore is the earliest a listing of the Kyma may have been taken to
// answer a check of a module verified at since.
func (l *Listings) notBefore(kyma string, since time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if reported := l.reported[kyma]; reported.After(since) {
		return reported
	}
	return since
}

func (l *Listings) recall(key listingKey, since, now time.Time) ([]metav1.PartialObjectMetadata, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	if !ok || !e.at.After(since) || now.Sub(e.at) >= l.ttl {
		return nil, false
	}
	return e.items, true
}

// store keeps a listing, and drops the expired ones once per ttl, so that
// the listings held are those of the Kymas checked in the last ttl.
func (l *Listings) store(key listingKey, e listing) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.at.Sub(l.swept) >= l.ttl {
		for k, old := range l.entries {
			if e.at.Sub(old.at) >= l.ttl {
				delete(l.entries, k)
			}
		}
		// A report older than ttl precedes every listing still usable.
		for kyma, at := range l.reported {
			if e.at.Sub(at) >= l.ttl {
				delete(l.reported, kyma)
			}
		}
		l.swept = e.at
	}
	if old, ok := l.entries[key]; !ok || old.at.Before(e.at) {
		l.entries[key] = e
	}
}

// Forget drops the listings of a Kyma, in every runtime, and those still
// on their way: its runtime reported a change to its objects, which a
// listing taken before would hide.
func (l *Listings) Forget(kyma string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reported[kyma] = time.Now()
	for k := range l.entries {
		if k.kyma == kyma {
			delete(l.entries, k)
		}
	}
}

// compact keeps of each object what ReadVersions reads: its name, uid,
// ownership labels and, in place of its resourceVersion, its
// apply.VersionOf (which for some objects digests the labels and
// annotations it does not keep), not its managed fields and annotations.
func compact(items []metav1.PartialObjectMetadata) []metav1.PartialObjectMetadata {
	out := make([]metav1.PartialObjectMetadata, len(items))
	for i := range items {
		in := &items[i].ObjectMeta
		labels := make(map[string]string, 3)
		for _, k := range []string{v1beta2.ManagedByLabel, v1beta2.KymaNameLabel, v1beta2.ModuleNameLabel} {
			if v, ok := in.Labels[k]; ok {
				labels[k] = v
			}
		}
		out[i].ObjectMeta = metav1.ObjectMeta{
			Name: in.Name, Namespace: in.Namespace, UID: in.UID, ResourceVersion: apply.VersionOf(in).ResourceVersion, Labels: labels,
		}
	}
	return out
}

package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Holding is what a cache's informers hold of one kind: what the process
// keeps in memory for it, whether or not the shard's wrapper shows it.
type Holding struct {
	Kind    string `json:"kind"`
	Objects int    `json:"objects"`
	// Bytes is the objects' size as JSON, as the cache holds them (without
	// managedFields): a measure of their memory that does not depend on the
	// rest of the process. Zero from HeldCounter.
	Bytes int64 `json:"bytes,omitempty"`
}

// Held lists what c's informers hold of the kinds that belong to a Kyma,
// and their size. It encodes every object: for benchmarks and tests, not
// for every scrape (HeldCounter).
func Held(ctx context.Context, c cache.Cache) ([]Holding, error) {
	held := Unfiltered(c)
	out := make([]Holding, 0, len(kindsOfAKyma))
	for _, kind := range kindsOfAKyma {
		list := kind.newList()
		if err := held.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the cached %ss: %w", kind.name, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		h := Holding{Kind: kind.name, Objects: len(items)}
		for _, item := range items {
			data, err := json.Marshal(item)
			if err != nil {
				return nil, fmt.Errorf("sizing a cached %s: %w", kind.name, err)
			}
			h.Bytes += int64(len(data))
		}
		out = append(out, h)
	}
	return out, nil
}

// HeldCounter counts, as events arrive, how many objects c's informers
// hold of each kind that belongs to a Kyma (the other shards' included), so
// that a metric reads them without listing the cache at each scrape.
type HeldCounter struct {
	counts []atomic.Int64
}

// NewHeldCounter starts counting what c's informers hold; call it before c
// starts, so that no event is missed.
func NewHeldCounter(ctx context.Context, c cache.Cache) (*HeldCounter, error) {
	held := Unfiltered(c)
	counter := &HeldCounter{counts: make([]atomic.Int64, len(kindsOfAKyma))}
	for i, kind := range kindsOfAKyma {
		informer, err := held.GetInformer(ctx, kind.object, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("counting the cached %ss: %w", kind.name, err)
		}
		count := &counter.counts[i]
		// An informer's relist after a lost watch hands its handlers an
		// update for what stayed, an add for what is new and a delete for
		// what went: the count stays right.
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { count.Add(1) },
			DeleteFunc: func(any) { count.Add(-1) },
		}); err != nil {
			return nil, fmt.Errorf("counting the cached %ss: %w", kind.name, err)
		}
	}
	return counter, nil
}

// Counts are the objects held now, by kind.
func (c *HeldCounter) Counts() map[string]int {
	out := make(map[string]int, len(kindsOfAKyma))
	for i, kind := range kindsOfAKyma {
		out[kind.name] = int(c.counts[i].Load())
	}
	return out
}

package shard

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Selector is what s's informers of Kymas, Manifests and Secrets list and
// watch on the API server: every object not filed under another shard's
// bucket. That is s's own share, and the objects filed under no bucket (or
// under a value that is none): new Kymas, Secrets that other teams wrote,
// objects of an operator that ran unsharded before. Those are held by every
// shard until the leader of their Kyma's shard files them (label.go), and
// meanwhile reconciled by that shard, so that a Kyma is never left without
// a shard while it waits for its label. A selector of "in (my buckets)"
// would hold less of them, but nobody would reconcile them until filed.
// Everything, for an unsharded operator: it needs no label.
func (s Shard) Selector() labels.Selector {
	if !s.Enabled() {
		return labels.Everything()
	}
	others := make([]string, 0, Buckets-Buckets/s.Count)
	for bucket := range Buckets {
		if bucket%s.Count != s.ID {
			others = append(others, strconv.Itoa(bucket))
		}
	}
	filed, err := labels.NewRequirement(v1beta2.ShardBucketLabel, selection.NotIn, others)
	if err != nil {
		// Only a bug makes the constant key or a number invalid.
		panic(fmt.Sprintf("shard selector: %v", err))
	}
	return labels.NewSelector().Add(*filed)
}

// ByObject is the manager's cache options of the kinds that belong to a
// Kyma: its Kymas are those of kymas (the --kyma-selector) and of s's
// Selector, its Manifests and Secrets those of the Selector. Secrets of no
// Kyma (registry credentials, certificates) carry no bucket, so every shard
// holds them.
func (s Shard) ByObject(kymas labels.Selector) map[client.Object]cache.ByObject {
	if !s.Enabled() {
		return map[client.Object]cache.ByObject{&v1beta2.Kyma{}: {Label: kymas}}
	}
	// One entry per kind: the map's keys are pointers, and two keys of one
	// kind would leave which selector wins to the map's order.
	filed := s.Selector()
	requirements, _ := filed.Requirements()
	return map[client.Object]cache.ByObject{
		&v1beta2.Kyma{}:     {Label: kymas.Add(requirements...)},
		&v1beta2.Manifest{}: {Label: filed},
		&corev1.Secret{}:    {Label: filed},
	}
}

// NewCache wraps a manager's cache so that objects of other shards are not
// there: a Get answers NotFound, a List leaves them out, and no informer
// handler (so no controller's watch) hears of them. Every reconcile, index
// lookup and event handler of the operator reads through it, so no code
// path can touch another shard's Kyma by mistake.
//
// With ByObject, the informers hold the shard's share (and objects not
// filed yet) only; the wrapper stays because a label is anyone's to write
// and a name is not: a Kyma that a person labels with another shard's
// bucket reaches that shard's informers, and the wrapper keeps that shard
// from reconciling it (while its leader puts the label right), so that no
// Kyma is worked on by two shards at once.
func (s Shard) NewCache(newCache cache.NewCacheFunc) cache.NewCacheFunc {
	if !s.Enabled() {
		return newCache
	}
	return func(config *rest.Config, opts cache.Options) (cache.Cache, error) {
		inner, err := newCache(config, opts)
		if err != nil {
			return nil, err
		}
		return &shardCache{Cache: inner, shard: s, scheme: opts.Scheme}, nil
	}
}

type shardCache struct {
	cache.Cache
	shard  Shard
	scheme *k8sruntime.Scheme
}

func (c *shardCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Cache.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if !c.shard.Owns(obj) {
		return apierrors.NewNotFound(c.resourceOf(obj), key.Name)
	}
	return nil
}

func (c *shardCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Cache.List(ctx, list, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, item := range items {
		if c.shard.Owns(item) {
			kept = append(kept, item)
		}
	}
	if len(kept) == len(items) {
		return nil
	}
	return meta.SetList(list, kept)
}

func (c *shardCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	informer, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return shardInformer{Informer: informer, shard: c.shard}, nil
}

func (c *shardCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	informer, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err != nil {
		return nil, err
	}
	return shardInformer{Informer: informer, shard: c.shard}, nil
}

// resourceOf names obj's resource for a NotFound error, as well as the
// scheme can; the name is only read by people.
func (c *shardCache) resourceOf(obj client.Object) schema.GroupResource {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return schema.GroupResource{}
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.GroupResource()
}

// shardInformer hands its handlers only the objects of the shard; an object
// that leaves the shard (a Kyma label changed) reaches them as deleted.
type shardInformer struct {
	cache.Informer
	shard Shard
}

func (i shardInformer) filter(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	return toolscache.FilteringResourceEventHandler{FilterFunc: i.shard.Owns, Handler: h}
}

func (i shardInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(i.filter(h))
}

func (i shardInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(i.filter(h), resync)
}

func (i shardInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(i.filter(h), opts)
}

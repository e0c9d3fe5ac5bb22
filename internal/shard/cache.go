package shard

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewCache wraps a manager's cache so that objects of other shards are not
// there: a Get answers NotFound, a List leaves them out, and no informer
// handler (so no controller's watch) hears of them. Every reconcile, index
// lookup and event handler of the operator reads through it, so no code
// path can touch another shard's Kyma by mistake. The informers still hold
// every object of the namespace; the split saves work, not memory.
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

package fetch

import (
	"container/list"
	"sync"
)

// memoryCache holds content by digest up to a byte bound, evicting the least
// recently used first. Entries are never modified: callers get copies.
type memoryCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	order *list.List // of *memoryEntry, most recently used at the front
	index map[string]*list.Element
}

type memoryEntry struct {
	digest string
	data   []byte
}

func newMemoryCache(limit int64) *memoryCache {
	return &memoryCache{limit: limit, order: list.New(), index: map[string]*list.Element{}}
}

func (c *memoryCache) get(digest string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.index[digest]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*memoryEntry).data, true
}

// add stores data unless it alone exceeds the bound, then evicts from the
// back until the cache fits again.
func (c *memoryCache) add(digest string, data []byte) {
	size := int64(len(data))
	if size > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[digest]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.index[digest] = c.order.PushFront(&memoryEntry{digest: digest, data: data})
	c.size += size
	for c.size > c.limit {
		oldest := c.order.Back()
		entry := c.order.Remove(oldest).(*memoryEntry)
		delete(c.index, entry.digest)
		c.size -= int64(len(entry.data))
	}
}

// bytes is the size of everything held.
func (c *memoryCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

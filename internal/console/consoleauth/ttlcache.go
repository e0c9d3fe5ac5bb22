package consoleauth

import (
	"sync"
	"time"
)

// ttlCache remembers answers for a while, bounded in size: a viewer's page
// and its live fragments ask the same questions many times a minute, and
// each answer otherwise costs a request to the API server. When full, the
// oldest entry goes first; an expired entry is never answered.
type ttlCache[V any] struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	seq     uint64
	entries map[string]ttlEntry[V]
	// order holds the stores oldest first, for eviction; a store whose key
	// was stored again since is stale and skipped.
	order []stored
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
	seq     uint64
}

type stored struct {
	key string
	seq uint64
}

// CacheOptions bound a cache of answers from the API server; zero fields
// take the cache's defaults.
type CacheOptions struct {
	// TTL is how long an answer is reused.
	TTL time.Duration
	// MaxEntries bounds the answers kept; the oldest go first.
	MaxEntries int
	// Now tells the time (tests); time.Now when nil.
	Now func() time.Time
}

// newCache makes the cache o describes, with defaults for its zero fields.
func newCache[V any](o CacheOptions, defaultTTL time.Duration, defaultMax int) *ttlCache[V] {
	if o.TTL <= 0 {
		o.TTL = defaultTTL
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = defaultMax
	}
	return newTTLCache[V](o.TTL, o.MaxEntries, o.Now)
}

func newTTLCache[V any](ttl time.Duration, maxEntries int, now func() time.Time) *ttlCache[V] {
	if now == nil {
		now = time.Now
	}
	if maxEntries < 1 {
		maxEntries = 1
	}
	return &ttlCache[V]{ttl: ttl, max: maxEntries, now: now, entries: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

func (c *ttlCache[V]) put(key string, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, replacing := c.entries[key]
	for !replacing && len(c.entries) >= c.max && len(c.order) > 0 {
		oldest := c.order[0]
		c.order = c.order[1:]
		if c.entries[oldest.key].seq == oldest.seq {
			delete(c.entries, oldest.key)
		}
	}
	c.seq++
	c.entries[key] = ttlEntry[V]{value: value, expires: c.now().Add(c.ttl), seq: c.seq}
	c.order = append(c.order, stored{key: key, seq: c.seq})
	if len(c.order) > 2*c.max {
		c.compact()
	}
}

// compact drops stale stores from order, so that keys stored again and
// again while the cache is not full do not make it grow without bound.
func (c *ttlCache[V]) compact() {
	live := c.order[:0]
	for _, s := range c.order {
		if c.entries[s.key].seq == s.seq {
			live = append(live, s)
		}
	}
	c.order = live
}

func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

package consoleauth

import (
	"fmt"
	"testing"
	"time"
)

// TestTTLCacheIsBoundedAndExpires: entries expire after the TTL, the cache
// never holds more than its bound (the oldest go first), and storing one
// key again and again does not grow it.
func TestTTLCacheIsBoundedAndExpires(t *testing.T) {
	now := time.Unix(0, 0)
	c := newTTLCache[int](time.Minute, 3, func() time.Time { return now })
	for i := range 5 {
		c.put(fmt.Sprint(i), i)
	}
	if c.len() != 3 {
		t.Fatalf("%d entries, want the bound 3", c.len())
	}
	if _, ok := c.get("0"); ok {
		t.Fatal("the oldest entry was kept beyond the bound")
	}
	if v, ok := c.get("4"); !ok || v != 4 {
		t.Fatalf("newest entry = %d, %v", v, ok)
	}
	for range 100 {
		c.put("4", 4)
	}
	if c.len() != 3 || len(c.order) > 6 {
		t.Fatalf("re-storing one key grew the cache: %d entries, %d in order", c.len(), len(c.order))
	}
	if _, ok := c.get("3"); !ok {
		t.Fatal("re-storing one key evicted another")
	}
	now = now.Add(time.Minute)
	if _, ok := c.get("4"); ok {
		t.Fatal("an entry outlived its TTL")
	}
}

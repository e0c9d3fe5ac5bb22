package fetch

import (
	"testing"

	. "github.com/onsi/gomega"
)

// step adds size bytes under key, or reads key when size is 0.
type step struct {
	key  string
	size int
}

func add(key string, size int) step { return step{key: key, size: size} }
func read(key string) step          { return step{key: key} }

func TestMemoryCacheEviction(t *testing.T) {
	tests := []struct {
		name      string
		steps     []step
		wantHeld  []string
		wantGone  []string
		wantBytes int64
	}{
		{name: "fits", steps: []step{add("a", 4), add("b", 4)},
			wantHeld: []string{"a", "b"}, wantBytes: 8},
		{name: "least recently used goes first", steps: []step{add("a", 4), add("b", 4), add("c", 4)},
			wantHeld: []string{"b", "c"}, wantGone: []string{"a"}, wantBytes: 8},
		{name: "a read makes an entry recent", steps: []step{add("a", 4), add("b", 4), read("a"), add("c", 4)},
			wantHeld: []string{"a", "c"}, wantGone: []string{"b"}, wantBytes: 8},
		{name: "a large entry evicts several", steps: []step{add("a", 3), add("b", 3), add("c", 3), add("d", 9)},
			wantHeld: []string{"d"}, wantGone: []string{"a", "b", "c"}, wantBytes: 9},
		{name: "larger than the bound is not kept", steps: []step{add("a", 4), add("big", 11)},
			wantHeld: []string{"a"}, wantGone: []string{"big"}, wantBytes: 4},
		{name: "adding twice counts once", steps: []step{add("a", 4), add("a", 4)},
			wantHeld: []string{"a"}, wantBytes: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := newMemoryCache(10)
			for _, s := range tt.steps {
				if s.size == 0 {
					c.get(s.key)
					continue
				}
				c.add(s.key, make([]byte, s.size))
			}
			// Check what is gone first: reading a held entry reorders the cache.
			for _, k := range tt.wantGone {
				_, ok := c.get(k)
				g.Expect(ok).To(BeFalse(), "%s should be gone", k)
			}
			for _, k := range tt.wantHeld {
				_, ok := c.get(k)
				g.Expect(ok).To(BeTrue(), "%s should be held", k)
			}
			g.Expect(c.bytes()).To(Equal(tt.wantBytes))
		})
	}
}

package metrics

import (
	"context"
	"sync"
)

// sources are the operators of this process (one in production; one per
// shard in the benchmark) whose state a collector reads at each scrape.
type sources[T any] struct {
	mu  sync.Mutex
	set map[*T]struct{}
}

// add makes source one of them until ctx ends.
func (s *sources[T]) add(ctx context.Context, source *T) {
	s.mu.Lock()
	if s.set == nil {
		s.set = map[*T]struct{}{}
	}
	s.set[source] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.set, source)
		s.mu.Unlock()
	})
}

// list is every source now.
func (s *sources[T]) list() []*T {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*T, 0, len(s.set))
	for source := range s.set {
		out = append(out, source)
	}
	return out
}

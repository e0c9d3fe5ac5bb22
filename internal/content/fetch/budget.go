package fetch

import (
	"context"
	"fmt"

	"golang.org/x/sync/semaphore"
)

// budget bounds the bytes of all downloads in flight together. A cap per
// download alone does not bound memory: every Manifest worker can download
// at once. A download reserves its declared size before it reads the body,
// or the per-download cap when the size is not declared, and gives it back
// when it is done, so the sum held in download buffers stays within the
// budget; downloads beyond it wait their turn (within the fetch timeout).
type budget struct {
	sem      *semaphore.Weighted
	total    int64
	maxBytes int64

	// waiting, when set by a test, is called each time a download has to
	// wait for room.
	waiting func()
}

func newBudget(total, maxBytes int64) *budget {
	// A single download at the cap must always fit, or it would wait
	// forever.
	total = max(total, maxBytes)
	return &budget{sem: semaphore.NewWeighted(total), total: total, maxBytes: maxBytes}
}

// reserve waits until declared bytes (the cap when declared is negative,
// i.e. unknown) fit in the budget, and returns the function that gives them
// back.
func (b *budget) reserve(ctx context.Context, declared int64) (func(), error) {
	n := declared
	if n < 0 || n > b.maxBytes {
		n = b.maxBytes
	}
	if b.sem.TryAcquire(n) {
		return func() { b.sem.Release(n) }, nil
	}
	if b.waiting != nil {
		b.waiting()
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("waiting for room in the in-flight download budget of %d bytes (--content-inflight-bytes): %w", b.total, err)
	}
	return func() { b.sem.Release(n) }, nil
}

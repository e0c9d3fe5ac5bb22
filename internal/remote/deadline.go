package remote

import (
	"context"
	"time"
)

// WithReconcileDeadline bounds one reconcile that talks to a runtime, so that
// a runtime that answers every request just before its timeout still cannot
// hold a worker for long. Zero or less means no deadline. Callers keep the
// parent context for the final status patch, so that the outcome of a
// reconcile that ran out of time is still recorded.
func WithReconcileDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

package reconciler

import (
	"context"
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Cause is a stable, short description of err's class for a condition
// message ("timed out", "forbidden"), never its text: raw error text flaps
// from one attempt to the next and may quote what others chose (links,
// registry answers), so it goes to events and logs only.
func Cause(err error) string {
	var netErr net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case apierrors.IsUnauthorized(err):
		return "the credentials were refused (401)"
	case apierrors.IsForbidden(err):
		return "forbidden (403)"
	case apierrors.IsTooManyRequests(err):
		return "rate limited (429)"
	case meta.IsNoMatchError(err):
		return "a kind is not served"
	case apierrors.IsNotFound(err):
		return "not found"
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return "refused as invalid"
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return "conflicting change"
	case apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return "server error"
	case errors.As(err, &netErr):
		return "connection failed"
	default:
		return "failed"
	}
}

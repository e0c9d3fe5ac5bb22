package remote

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// IsConnectionError tells errors that mean "this runtime cannot be used
// right now" (unreachable, TLS, refused credentials) from errors about a
// single request.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return true
	}
	if meta.IsNoMatchError(err) {
		// An answer of the runtime's discovery: the kind is not there.
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	// Anything that never got an API answer: dial, TLS, timeouts.
	return true
}

// IsMissing tells errors that mean the runtime lacks a resource type or an
// object a request relied on: NotFound, or a kind its discovery does not
// know. After such an error, what was remembered as applied may not be
// there any more.
func IsMissing(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

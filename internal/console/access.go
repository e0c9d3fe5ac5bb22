package console

import (
	"context"
	"net/http"
)

// Viewer is who looks at the console.
type Viewer struct {
	Name   string
	Groups []string
	Extra  map[string][]string
}

// Authenticator finds the viewer of a request; an error answers 401.
type Authenticator interface {
	Authenticate(r *http.Request) (Viewer, error)
}

// Access says what a viewer may see: whether they may list resource (e.g. "kymas", "modulerollouts", "runtimebackups", "manifests", "moduletemplates") in namespace. Answers may be cached by the implementation.
type Access interface {
	CanList(ctx context.Context, v Viewer, resource, namespace string) (bool, error)
}

package incluster

import (
	"context"
	"fmt"
	"net/http"

	"github.com/runtime-fleet/lifecycle-manager/internal/console"
)

// newPages builds the console's pages for the in-cluster mode.
//
// TODO(lead, issue 31): replace the body with the console of
// i31-console-core once merged, e.g.
//
//	return console.New(console.Options{Authenticator: auth, Access: access, Namespace: o.Namespace, Config: o.Config, ...})
//
// (its cache is restricted to o.Namespace and the console's kinds; no
// Secret informer). Until then this stand-in does what the pages will do
// first on every request, so that the mode, its RBAC and its probes can be
// installed and tested: it authenticates (401), asks whether the viewer may
// list Kymas (403), and says that the pages are not there yet.
//
//nolint:unparam // console.New, which replaces this stand-in, can fail
func newPages(_ context.Context, o Options, auth console.Authenticator, access console.Access) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		viewer, err := auth.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lifecycle-manager-console"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		allowed, err := access.CanList(r.Context(), viewer, "kymas", o.Namespace)
		if err != nil {
			http.Error(w, "the API server could not say what you may see; try again", http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("%s may not list kymas in %s: ask for a RoleBinding that allows it", viewer.Name, o.Namespace), http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = fmt.Fprintf(w, "Signed in as %s. The console's pages are not part of this build yet.\n", viewer.Name)
	}), nil
}

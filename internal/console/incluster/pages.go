package incluster

import (
	"context"
	"fmt"
	"net/http"

	"github.com/runtime-fleet/lifecycle-manager/internal/console"
)

// newPages builds the console's pages for the in-cluster mode, reading
// with the console's ServiceAccount and showing each viewer what the API
// server says they may list; its informers run until ctx ends.
func newPages(ctx context.Context, o Options, auth console.Authenticator, access console.Access) (http.Handler, error) {
	c, err := console.New(console.Options{Config: o.Config, Namespace: o.Namespace, Authenticator: auth, Access: access})
	if err != nil {
		return nil, err
	}
	go func() {
		if err := c.Start(ctx); err != nil && ctx.Err() == nil {
			panic(fmt.Sprintf("the console's informers stopped: %v", err))
		}
	}()
	return c, nil
}

package dev

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"

	"github.com/runtime-fleet/lifecycle-manager/internal/console"
)

// startConsole serves the fleet console of the session's control plane on
// a loopback port, as lmctl console does, until stop; it returns the URL
// with its token.
func startConsole(ctx context.Context, cfg *rest.Config, namespace string) (url string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("starting the console: %w", err)
	}
	auth, err := console.NewLocalAuthenticator("lmctl dev", console.ListenHosts(ln.Addr())...)
	if err != nil {
		_ = ln.Close()
		return "", nil, err
	}
	c, err := console.New(console.Options{Config: cfg, Namespace: namespace, Authenticator: auth, Access: console.AllowAll{}})
	if err != nil {
		_ = ln.Close()
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(ctx) }()
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return fmt.Sprintf("http://%s/?token=%s", ln.Addr(), auth.Token), func() error {
		cancel()
		if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, nil
}

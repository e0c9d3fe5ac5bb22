package lmctl

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtime-fleet/lifecycle-manager/internal/console"
)

func newConsoleCommand() *cobra.Command {
	var (
		kube   kubeFlags
		listen string
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the fleet console for you on this machine, reading with your kubeconfig",
		Long: `Serve the fleet console (docs/console.md) on a local address: every runtime and
module at a glance, live. It reads the control plane with your kubeconfig, so it
shows what your rights show, and it serves only you: the URL it prints carries a
token, which the first request turns into a cookie. Ctrl-C stops it.`,
		Example: "  lmctl console\n  lmctl console -n kcp-system --listen 127.0.0.1:8090",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := kube.config()
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", listen, err)
			}
			auth, err := console.NewLocalAuthenticator(cfg.Username, console.ListenHosts(ln.Addr())...)
			if err != nil {
				return err
			}
			c, err := console.New(console.Options{Config: cfg, Namespace: kube.namespace, Authenticator: auth, Access: console.AllowAll{}})
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			errs := make(chan error, 2)
			go func() { errs <- c.Start(ctx) }()
			srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
			go func() { errs <- srv.Serve(ln) }()
			fmt.Fprintf(cmd.OutOrStdout(), "The console of namespace %s: http://%s/?token=%s\nCtrl-C stops it.\n", kube.namespace, ln.Addr(), auth.Token)
			select {
			case <-ctx.Done():
				return srv.Close()
			case err := <-errs:
				if errors.Is(err, http.ErrServerClosed) {
					return nil
				}
				return err
			}
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "Address to serve on; a loopback address keeps the console on this machine.")
	return cmd
}

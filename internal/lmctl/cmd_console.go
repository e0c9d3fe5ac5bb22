package lmctl

import (
	"fmt"

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
			ctx := cmd.Context()
			local, err := console.ServeLocal(ctx, cfg, kube.namespace, listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "The console of namespace %s: %s\nCtrl-C stops it.\n", kube.namespace, local.URL)
			select {
			case <-ctx.Done():
				return local.Close()
			case err := <-local.Done():
				return err
			}
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "Address to serve on; a loopback address keeps the console on this machine.")
	return cmd
}

package lmctl

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/status"
)

func newStatusCommand() *cobra.Command {
	var (
		kube    kubeFlags
		format  = output.Table
		runtime string
		watch   bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the fleet at a glance, or one runtime's modules",
		Long: `Show one row per runtime (Kyma) of a control plane: its state and how many of its
modules are Ready. With --runtime, show that runtime's modules with version,
channel, state and message. -o json|yaml prints the same as a stable structure
for scripts; -w redraws whenever something changes.`,
		Example: `  lmctl status --kubeconfig kcp.kubeconfig
  lmctl status --runtime runtime-0
  lmctl status -o json | jq '.runtimes[] | select(.state != "Ready")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := statusPrinter{namespace: kube.namespace, runtime: runtime, format: format}
			if watch {
				src, err := kube.live(cmd.Context(), &v1beta2.Kyma{})
				if err != nil {
					return err
				}
				return watchAndPrint(cmd.Context(), cmd.OutOrStdout(), format, src, s.get, s.print)
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			fleet, err := s.get(cmd.Context(), c)
			if err != nil {
				return err
			}
			return s.print(cmd.OutOrStdout(), fleet)
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().VarP(&format, "output", "o", "Output format: table, json or yaml.")
	cmd.Flags().StringVar(&runtime, "runtime", "", "Show the modules of this runtime (Kyma name).")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Keep watching and print again whenever something changes.")
	return cmd
}

type statusPrinter struct {
	namespace string
	runtime   string
	format    output.Format
}

func (s statusPrinter) get(ctx context.Context, c client.Reader) (status.Fleet, error) {
	fleet, err := status.Get(ctx, c, s.namespace)
	if err != nil {
		return fleet, err
	}
	if s.runtime != "" {
		if _, ok := fleet.Runtime(s.runtime); !ok {
			return fleet, fmt.Errorf("no runtime (Kyma) %q in namespace %s", s.runtime, s.namespace)
		}
	}
	return fleet, nil
}

// print writes the fleet, or with --runtime that one runtime.
func (s statusPrinter) print(w io.Writer, fleet status.Fleet) error {
	if s.runtime != "" {
		rt, _ := fleet.Runtime(s.runtime)
		if s.format != output.Table {
			return output.Structured(w, s.format, rt)
		}
		fmt.Fprintf(w, "Runtime %s (%s): %s, %d/%d modules Ready\n", rt.Name, orNone(rt.RuntimeID), orNone(string(rt.State)), rt.ModulesReady, rt.ModulesTotal)
		if rt.Message != "" {
			fmt.Fprintf(w, "  %s\n", rt.Message)
		}
		if rt.Paused != "" {
			fmt.Fprintf(w, "  Paused: %s\n", rt.Paused)
		}
		fmt.Fprintln(w)
		return status.WriteModules(w, rt)
	}
	if s.format != output.Table {
		return output.Structured(w, s.format, fleet)
	}
	if len(fleet.Runtimes) == 0 {
		_, err := fmt.Fprintf(w, "No runtimes (Kymas) in namespace %s.\n", s.namespace)
		return err
	}
	return status.WriteTable(w, fleet, time.Now())
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

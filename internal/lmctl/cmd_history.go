package lmctl

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/history"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

func newHistoryCommand() *cobra.Command {
	var (
		kube   kubeFlags
		format = output.Table
	)
	cmd := &cobra.Command{
		Use:   "history RUNTIME [MODULE]",
		Short: "Show what the operator did to a runtime's modules, newest first",
		Long: `Every install, upgrade, drift repair, removal and deletion of the runtime's
modules (RUNTIME is the Kyma's name), newest first: the versions, when it
started, how long it took, and how it ended. Error means the operator is
retrying by itself; Failed means it needs a human (the code says why,
docs/status.md says what to do). Each module keeps its last 10 operations; the
runtime keeps the last 20 removals of modules that are gone.`,
		Example: `  lmctl history kyma-sample
  lmctl history kyma-sample template-operator
  lmctl history kyma-sample -o json | jq '.[] | select(.needsHuman)'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			module := ""
			if len(args) == 2 {
				module = args[1]
			}
			entries, err := history.Read(cmd.Context(), c, kube.namespace, args[0], module, time.Now())
			if err != nil {
				return err
			}
			if format != output.Table {
				return output.Structured(cmd.OutOrStdout(), format, entries)
			}
			if len(entries) == 0 {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "No operations recorded for runtime %s.\n", args[0])
				return err
			}
			return history.WriteTable(cmd.OutOrStdout(), entries)
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().VarP(&format, "output", "o", "Output format: table, json or yaml.")
	return cmd
}

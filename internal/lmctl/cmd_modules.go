package lmctl

import (
	"github.com/spf13/cobra"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/catalog"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

func newModulesCommand() *cobra.Command {
	var (
		kube   kubeFlags
		format = output.Table
	)
	cmd := &cobra.Command{
		Use:   "modules",
		Short: "Show the module catalog: modules, channels and versions",
		Long: `Show every module of a control plane's catalog: which version each channel
points to (from its ModuleReleaseMeta), the published versions no channel points
to, and whether a module or version is mandatory, beta or internal. A channel
pointing to a version without a ModuleTemplate shows TEMPLATE <missing>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			cat, err := catalog.Get(cmd.Context(), c, kube.namespace)
			if err != nil {
				return err
			}
			if format != output.Table {
				return output.Structured(cmd.OutOrStdout(), format, cat)
			}
			return catalog.WriteTable(cmd.OutOrStdout(), cat)
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().VarP(&format, "output", "o", "Output format: table, json or yaml.")
	return cmd
}

package lmctl

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/klm"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/runtimes"
)

func newKLMCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "klm",
		Short: "Plan and check the takeover of a fleet from the Kyma lifecycle-manager",
		Long: `Taking over a fleet that the Kyma lifecycle-manager (KLM) runs, in place
(docs/migrating-from-klm.md): "plan" shows what the operator would take over,
before anything changes; "status" shows what it took over and what is left of
KLM. Both only read.`,
	}
	cmd.AddCommand(newKLMReadCommand("plan", "What the operator would take over, per runtime and for the fleet (reads only)",
		`For each Kyma (one with --kyma): whether it carries the label
operator.kyma-project.io/klm-takeover=true (--klm-takeover=labelled takes over
those; all takes over every Kyma), KLM's finalizers on it, and per KLM
Manifest the objects of its inventory that would be taken over (KLM marked them
as its own), those that would be left (they exist but KLM did not mark them:
the runtime owner's, named), those gone, and the default custom resource that
would become the module's; in the runtime, KLM's field managers on the
runtime's Kyma, its catalog copies and its agent (skr-webhook), which would be
removed. A runtime that cannot be reached is reported and the plan goes on.`,
		klm.WritePlan))
	cmd.AddCommand(newKLMReadCommand("status", "What the operator took over, and what is left of KLM",
		`For each Kyma (one with --kyma): each module's Manifest, the KLM Manifest it
took over (status.takenOver), how many objects and when, and what is left of
KLM: its Manifests, its finalizers on the Kyma, its agent in the runtime.`,
		klm.WriteStatus))
	return cmd
}

func newKLMReadCommand(use, short, long string, table func(io.Writer, *klm.Plan) error) *cobra.Command {
	var (
		kube          kubeFlags
		kyma          string
		syncNamespace string
		format        = output.Table
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Example: `  lmctl klm ` + use + `
  lmctl klm ` + use + ` --kyma kyma-sample
  lmctl klm ` + use + ` -o json | jq .totals`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			runtime := func(ctx context.Context, name string) (client.Client, error) {
				cfg, err := runtimes.Config(ctx, c, kube.namespace, name)
				if err != nil {
					return nil, err
				}
				return client.New(cfg, client.Options{Scheme: c.Scheme()})
			}
			plan, err := klm.BuildPlan(cmd.Context(), c, kube.namespace, kyma, syncNamespace, runtime)
			if err != nil {
				return err
			}
			if format != output.Table {
				return output.Structured(cmd.OutOrStdout(), format, plan)
			}
			return table(cmd.OutOrStdout(), plan)
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().StringVar(&kyma, "kyma", "", "One Kyma (runtime) instead of every Kyma in the namespace.")
	cmd.Flags().StringVar(&syncNamespace, "sync-namespace", v1beta2.DefaultRuntimeNamespace, "The runtimes' sync namespace (KLM's --sync-namespace), where the runtime's Kyma, the catalog and KLM's agent are.")
	cmd.Flags().VarP(&format, "output", "o", "Output format: table, json or yaml.")
	return cmd
}

package lmctl

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/dev"
)

func newDevCommand() *cobra.Command {
	opts := dev.Options{Runtimes: 2, Timeout: 5 * time.Minute, ErrorGrace: 20 * time.Second}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local fleet: control plane, runtimes, sample modules and the operator",
		Long: `Run a local fleet in one command, from a checkout of the repository:

  - builds the control-plane binaries into bin/ on the first run (make testbin), later reuses them
  - starts a control plane and --runtimes kwok runtimes (or attaches --runtime-kubeconfig clusters)
  - starts a local OCI registry, pushes the bundled sample modules, applies their
    ModuleTemplates and ModuleReleaseMetas
  - runs the lifecycle manager in this process (its log goes to the state directory)
  - registers every runtime (kubeconfig Secret) and creates a Kyma per runtime
  - shows every module of every runtime converge, then prints where everything is
    and what to try next, and stays up until Ctrl-C, which stops everything it started

The runtime-watcher agent is not started yet; the operator notices changes made
inside a runtime on its periodic reconcile (every 15s here).`,
		Example: `  make dev                                    # the same as: bin/lmctl dev
  lmctl dev --runtimes 3 --dir /tmp/fleet --keep
  lmctl dev --exit-when-ready --timeout 3m     # for scripts: exit 0 once Ready, else non-zero
  lmctl dev --runtime-kubeconfig ~/.kube/kind-a --runtime-kubeconfig ~/.kube/kind-b`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(opts.RuntimeKubeconfigs) > 0 && !cmd.Flags().Changed("runtimes") {
				opts.Runtimes = 0 // attached clusters instead of local ones
			}
			if cmd.Flags().Changed("modules") && len(opts.Modules) == 0 {
				return errors.New("--modules is empty: name at least one module")
			}
			opts.Out = cmd.OutOrStdout()
			opts.TTY, opts.Width = stdoutTerminal()
			return dev.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Runtimes, "runtimes", opts.Runtimes, "Number of local runtimes (0 when --runtime-kubeconfig is given, unless set).")
	f.StringArrayVar(&opts.RuntimeKubeconfigs, "runtime-kubeconfig", nil, "Attach an existing cluster as a runtime (repeatable); its current context is used.")
	f.StringSliceVar(&opts.Modules, "modules", nil, "Modules in every Kyma (default sample,chart,template-operator; evolving for attached clusters).")
	f.StringVar(&opts.Dir, "dir", "", "State directory: kubeconfigs, operator log, links to cluster logs (default: .dev in the checkout).")
	f.BoolVar(&opts.Keep, "keep", false, "Keep the state directory and the clusters' data after exit.")
	f.BoolVar(&opts.ExitWhenReady, "exit-when-ready", false, "Exit 0 once every module of every runtime is Ready; exit non-zero with the reason if not within --timeout.")
	f.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "How long the fleet may take to become Ready (not counting the first build of the binaries).")
	f.StringVar(&opts.ReadyFile, "ready-file", "", "Write this file (JSON: kubeconfig paths, runtimes) once everything is Ready; removed on exit.")
	f.DurationVar(&opts.ErrorGrace, "error-grace", opts.ErrorGrace, "With --exit-when-ready, give up early when a module stays in Error with the same message this long.")
	f.StringVar(&opts.ConsoleListen, "console-listen", "127.0.0.1:0", "Address of the fleet console (its URL, with a token, is printed once the fleet is Ready).")
	f.BoolVar(&opts.BrokenModule, "sample-modules-broken", false, "Add a module whose content cannot render, to test the failure path.")
	_ = f.MarkHidden("sample-modules-broken")
	_ = f.MarkHidden("error-grace")
	return cmd
}

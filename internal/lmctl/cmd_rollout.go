package lmctl

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/rollout"
)

func newRolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Show and steer module rollouts (ModuleRollouts)",
		Long: `A ModuleRollout moves the runtimes on one channel of one module to the channel's
new version in waves: a canary set, then at most maxInFlight at once, halting by
itself when too many fail (docs/rollouts.md).`,
	}
	cmd.AddCommand(newRolloutStatusCommand(), newRolloutPauseCommand(true), newRolloutPauseCommand(false), newRolloutRollbackCommand())
	return cmd
}

func newRolloutStatusCommand() *cobra.Command {
	var (
		kube   kubeFlags
		format = output.Table
		watch  bool
	)
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show every rollout, or one in detail",
		Long: `Without NAME, one row per rollout: phase, versions, wave, runtimes done, in flight
and failed. With NAME, that rollout in detail: a progress bar; the runtimes in
flight, failed, pending and done, with why each failed or waits (at most 20 of
each are named, the counts have them all); why it halted; who resumed it or
rolled it back, and a refused rollback's reason; the content digests every wave
installs; and when the planner last looked at it, saying so plainly when no
planner has for a while. -w redraws whenever something changes.`,
		Example: `  lmctl rollout status
  lmctl rollout status sample-regular -w
  lmctl rollout status -o json | jq '.[] | select(.phase == "Halted")'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := rolloutPrinter{namespace: kube.namespace, format: format}
			if len(args) == 1 {
				p.name = args[0]
			}
			if watch {
				src, err := kube.live(cmd.Context(), &v1beta2.ModuleRollout{})
				if err != nil {
					return err
				}
				return watchAndPrint(cmd.Context(), cmd.OutOrStdout(), format, src, p.get, p.print)
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			v, err := p.get(cmd.Context(), c)
			if err != nil {
				return err
			}
			return p.print(cmd.OutOrStdout(), v)
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().VarP(&format, "output", "o", "Output format: table, json or yaml.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Keep watching and print again whenever something changes.")
	return cmd
}

func newRolloutPauseCommand(pause bool) *cobra.Command {
	var kube kubeFlags
	use, short, done := "pause NAME", "Stop a rollout before its next wave (the wave in flight finishes)", "paused"
	if !pause {
		use, short, done = "resume NAME", "Let a paused or halted rollout go on with its next wave; the rollout's status records who resumed it", "resumed"
	}
	var reason string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			if pause {
				err = rollout.SetPaused(cmd.Context(), c, kube.namespace, args[0], true)
			} else {
				err = rollout.Resume(cmd.Context(), c, kube.namespace, args[0], resumedBy(reason, time.Now()))
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "ModuleRollout %s %s\n", args[0], done)
			return err
		},
	}
	kube.bind(cmd.Flags())
	if !pause {
		cmd.Flags().StringVar(&reason, "reason", "", "Why the rollout may go on (recorded in its status with who resumed it).")
	}
	return cmd
}

// resumedBy says who resumes a rollout, when and why.
func resumedBy(reason string, now time.Time) string {
	return actedBy("resume", reason, now)
}

// actedBy says who acts on a rollout with lmctl rollout <command>, when and
// why: the local user (lmctl has no better name for them), the time, and
// the reason given, within the 256 characters spec.resume and
// spec.rollback hold.
func actedBy(command, reason string, now time.Time) string {
	who := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = u.Username
	}
	by := fmt.Sprintf("%s at %s (lmctl rollout %s)", cmp.Or(who, "unknown"), now.UTC().Format(time.RFC3339), command)
	if reason != "" {
		by += ": " + reason
	}
	return by[:min(len(by), 256)]
}

func newRolloutRollbackCommand() *cobra.Command {
	var (
		kube   kubeFlags
		reason string
	)
	cmd := &cobra.Command{
		Use:   "rollback NAME --reason TEXT",
		Short: "Move the runtimes a rollout moved back to the earlier version, in waves",
		Long: `Sets the rollout's spec.rollback to who asks, when and why. The runtimes that moved
go back to the rollout's earlier version in waves, with the same canary,
maxInFlight, soak, deadline and analyses. Only a version whose ModuleTemplate
lists the earlier one in spec.rollbackTo can go back; otherwise the rollback is
refused, and lmctl rollout status says why (docs/rollouts.md).`,
		Example: `  lmctl rollout rollback shop-regular --reason "2.0.0 loses orders"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return fmt.Errorf("say why with --reason: the rollout's status records it with who rolled it back")
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			ro, err := rollout.Rollback(cmd.Context(), c, kube.namespace, args[0], actedBy("rollback", reason, time.Now()))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if _, err := fmt.Fprintf(out, "ModuleRollout %s: rollback asked for; lmctl rollout status %s shows whether it runs or was refused\n", args[0], args[0]); err != nil {
				return err
			}
			if ro.Spec.Paused {
				_, err = fmt.Fprintf(out, "It is paused: no wave of the rollback starts until lmctl rollout resume %s\n", args[0])
			}
			return err
		},
	}
	kube.bind(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "", "Why the rollout goes back (required; recorded in its status with who asked).")
	return cmd
}

type rolloutPrinter struct {
	namespace string
	name      string
	format    output.Format
}

func (p rolloutPrinter) get(ctx context.Context, c client.Reader) (any, error) {
	if p.name != "" {
		return rollout.Get(ctx, c, p.namespace, p.name)
	}
	return rollout.List(ctx, c, p.namespace)
}

func (p rolloutPrinter) print(w io.Writer, v any) error {
	if p.format != output.Table {
		return output.Structured(w, p.format, v)
	}
	switch r := v.(type) {
	case rollout.Rollout:
		return rollout.WriteDetail(w, r, time.Now())
	case []rollout.Rollout:
		if len(r) == 0 {
			_, err := fmt.Fprintf(w, "No ModuleRollouts in namespace %s: every channel's new version reaches its runtimes at once.\n", p.namespace)
			return err
		}
		return rollout.WriteTable(w, r)
	}
	return nil
}

// Package lmctl holds lmctl's commands. Each command is a thin cobra layer
// over a package with one job (dev, status, catalog), so that the logic can
// be tested without a command line and the command line stays readable.
package lmctl

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Main runs lmctl with args and returns the process's exit code.
func Main(args []string) int {
	ctx, stop := signalContext()
	defer stop()
	cmd := NewCommand()
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "lmctl:", err)
		if ctx.Err() != nil {
			return 130 // interrupted, as shells report it
		}
		return 1
	}
	return 0
}

// NewCommand returns lmctl's root command.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "lmctl",
		Short: "Work with a Lifecycle Manager fleet: a local one for development, or any control plane",
		Long: `lmctl works with a Lifecycle Manager fleet.

  lmctl dev       a local control plane, runtimes, sample modules and the operator, in one command
  lmctl status    the fleet at a glance: one row per runtime, or one runtime's modules
  lmctl modules   the module catalog: channels, versions, mandatory/beta/internal
  lmctl rollout   module rollouts in waves: status, pause, resume
  lmctl klm       plan and check the takeover of a fleet from the Kyma lifecycle-manager`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand(), newStatusCommand(), newModulesCommand(), newRolloutCommand(), newHistoryCommand(), newBackupCommand(), newModuleCommand(), newConsoleCommand(), newKLMCommand())
	return root
}

// signalContext ends on the first SIGINT or SIGTERM, so that commands shut
// down cleanly; a second one exits at once (child processes die with lmctl,
// see testcluster).
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		<-signals
		fmt.Fprintln(os.Stderr, "lmctl: interrupted again, exiting without cleaning up")
		os.Exit(130)
	}()
	return ctx, func() {
		signal.Stop(signals)
		cancel()
	}
}

// stdoutTerminal reports whether stdout is a terminal, and its width (0 when
// unknown).
func stdoutTerminal() (bool, func() int) {
	fd := int(os.Stdout.Fd())
	if !term.IsTerminal(fd) {
		return false, nil
	}
	return true, func() int {
		w, _, err := term.GetSize(fd)
		if err != nil {
			return 0
		}
		return w
	}
}

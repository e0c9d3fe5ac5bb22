package dev

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// printTour tells a newcomer where everything is and what to try: commands
// to copy, each of which changes something they can then watch converge in
// the lines printed below the tour.
func printTour(out io.Writer, env Environment, modules []string, keep bool, readyInterval time.Duration) {
	lmctl := lmctlCommand()
	fmt.Fprintf(out, "\nThe fleet (namespace %s of the control plane):\n", env.Namespace)
	fmt.Fprintf(out, "  control plane  %s\n", env.KCPKubeconfig)
	for _, rt := range env.Runtimes {
		fmt.Fprintf(out, "  %-13s  %s\n", rt.Name, rt.Kubeconfig)
	}
	fmt.Fprintf(out, "  console        %s\n", env.Console)
	fmt.Fprintf(out, "  operator log   %s\n", env.OperatorLog)
	fmt.Fprintf(out, "  cluster logs   %s\n", filepath.Join(env.Dir, "clusters"))

	first := env.Runtimes[0]
	fmt.Fprintf(out, "\nTry, in another terminal:\n")
	fmt.Fprint(out, commented([][2]string{
		{"export KUBECONFIG=" + env.KCPKubeconfig, ""},
		{lmctl + " status", "the fleet at a glance (-w to watch)"},
		{lmctl + " status --runtime " + first.Name, "one runtime's modules"},
		{lmctl + " modules", "the catalog: channels and versions"},
		{lmctl + " history " + first.Name, "what the operator did to its modules, newest first"},
		{lmctl + " backup list " + first.Name, "its backups (every 5 minutes, into the local registry)"},
		{"# lmctl backup restore decrypts them with --identity " + env.BackupIdentity, ""},
		{"kubectl -n " + env.Namespace + " get kymas,manifests", ""},
	}))

	module := samplemodules.Evolving
	index := slices.Index(modules, module)
	if index < 0 {
		index = len(modules)
		fmt.Fprintf(out, "\n  # Add the %s module to %s and watch it install (lines appear below):\n", module, first.Name)
		fmt.Fprintf(out, "  kubectl -n %s patch kyma %s --type=json -p '%s'\n", env.Namespace, first.Name, jsonPatch("add", "/spec/modules/-", fmt.Sprintf(`{"name":%q}`, module)))
		fmt.Fprintf(out, "  kubectl --kubeconfig %s -n %s get configmaps\n", first.Kubeconfig, v1beta2.DefaultRuntimeNamespace)
	}
	owner := env.Runtimes[len(env.Runtimes)-1]
	if owner.Attached {
		fmt.Fprintf(out, "\n  # As %s's owner, add it in the runtime's own Kyma (picked up on the next periodic reconcile,\n", owner.Name)
		fmt.Fprintf(out, "  # within %s: an attached cluster has no runtime-watcher here):\n", readyInterval)
	} else {
		fmt.Fprintf(out, "\n  # As %s's owner, add it in the runtime's own Kyma (its runtime-watcher reports the change\n", owner.Name)
		fmt.Fprint(out, "  # at once; see \"Report accepted\" in the operator log):\n")
	}
	fmt.Fprintf(out, "  kubectl --kubeconfig %s -n %s patch kyma %s --type=merge -p '{\"spec\":{\"modules\":[{\"name\":%q}]}}'\n",
		owner.Kubeconfig, v1beta2.DefaultRuntimeNamespace, v1beta2.DefaultRuntimeKymaName, module)

	fmt.Fprintf(out, "\n  # Upgrade it in %s through the fast channel (2.0.0 drops one ConfigMap and adds another):\n", first.Name)
	fmt.Fprintf(out, "  kubectl -n %s patch kyma %s --type=json -p '%s'\n", env.Namespace, first.Name, jsonPatch("add", fmt.Sprintf("/spec/modules/%d/channel", index), `"fast"`))
	fmt.Fprintf(out, "\n  # Remove it from %s; the operator uninstalls it from the runtime:\n", first.Name)
	fmt.Fprintf(out, "  kubectl -n %s patch kyma %s --type=json -p '%s'\n", env.Namespace, first.Name, jsonPatch("remove", fmt.Sprintf("/spec/modules/%d", index), ""))

	if keep {
		fmt.Fprintf(out, "\nChanges appear below. Ctrl-C stops everything and keeps %s.\n\n", env.Dir)
	} else {
		fmt.Fprintf(out, "\nChanges appear below. Ctrl-C stops everything and removes %s.\n\n", env.Dir)
	}
}

// commented lays out commands with their comments aligned in one column.
func commented(lines [][2]string) string {
	width := 0
	for _, l := range lines {
		if l[1] != "" {
			width = max(width, len(l[0]))
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if l[1] == "" {
			fmt.Fprintf(&b, "  %s\n", l[0])
		} else {
			fmt.Fprintf(&b, "  %-*s  # %s\n", width, l[0], l[1])
		}
	}
	return b.String()
}

// jsonPatch is a one-operation JSON patch; value is JSON, or empty for none.
func jsonPatch(op, path, value string) string {
	if value == "" {
		return fmt.Sprintf(`[{"op":%q,"path":%q}]`, op, path)
	}
	return fmt.Sprintf(`[{"op":%q,"path":%q,"value":%s}]`, op, path, value)
}

// lmctlCommand is how the user can run lmctl again: the binary's path
// relative to the working directory when it is below it (bin/lmctl after
// make dev), `go run ./cmd/lmctl` when run that way, else its absolute path.
func lmctlCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "lmctl"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/lmctl"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return exe
}

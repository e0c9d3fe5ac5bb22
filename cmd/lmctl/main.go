// Command lmctl is the lifecycle manager's command line for people: a local
// fleet in one command (lmctl dev), the fleet at a glance (lmctl status) and
// the module catalog (lmctl modules). Everything is in internal/lmctl.
package main

import (
	"os"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl"
)

func main() {
	// lmctl dev runs the operator in-process, and it renders Helm charts
	// in child processes of this binary; in one of them, this renders
	// and exits.
	render.ServeIfRenderProcess()
	os.Exit(lmctl.Main(os.Args[1:]))
}

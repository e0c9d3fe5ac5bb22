// Command lmctl is the lifecycle manager's command line for people: a local
// fleet in one command (lmctl dev), the fleet at a glance (lmctl status) and
// the module catalog (lmctl modules). Everything is in internal/lmctl.
package main

import (
	"os"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl"
)

func main() {
	os.Exit(lmctl.Main(os.Args[1:]))
}

// Package version is what a build says about itself: its version and, for
// the operator, the runtime-watcher image it installs into runtimes. `make
// images` stamps both with -ldflags -X; a plain go build says "dev" and
// keeps the agent image of the flag's default.
package version

import (
	"fmt"
	"io"
	"runtime/debug"
)

// Version is the build's version, stamped by make images.
var Version = "dev"

// AgentImage is the runtime-watcher image built together with this
// operator, by digest (repository@sha256:...); empty when not stamped.
var AgentImage = ""

// Print writes the --version output of the named binary: the version, the
// agent image when stamped, and the Go version and VCS revision it was built
// from.
func Print(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, Version)
	if AgentImage != "" {
		fmt.Fprintf(w, "agent image: %s\n", AgentImage)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fmt.Fprintf(w, "go: %s\n", info.GoVersion)
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			fmt.Fprintf(w, "revision: %s\n", s.Value)
		}
	}
}

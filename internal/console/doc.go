// Package console is the fleet console: every runtime and module at a
// glance in a browser (issue 31). This branch holds only its access
// interfaces (access.go), which the in-cluster mode implements in
// consoleauth.
package console

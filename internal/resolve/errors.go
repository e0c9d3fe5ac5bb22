package resolve

import (
	"errors"
	"fmt"
)

// Sentinel errors say why a module did not resolve. Module.Err wraps exactly
// one of them, so a caller can choose its reaction with errors.Is while it shows
// Err's own message, which names the module, what is missing and what to fix.
// Whatever the error, the caller keeps what is installed: a catalog that cannot
// be resolved is never a reason to uninstall (see Module.Err).
var (
	// ErrNoReleaseMeta means the catalog has no ModuleReleaseMeta for the
	// module, so no channel can be mapped to a version: a misspelt module
	// name, or a module that has not been published.
	ErrNoReleaseMeta = errors.New("no ModuleReleaseMeta for the module")

	// ErrChannelNotFound means the module's ModuleReleaseMeta does not
	// assign a version to the channel the module resolves through.
	ErrChannelNotFound = errors.New("channel not in the ModuleReleaseMeta")

	// ErrInvalidVersion means the version a ModuleReleaseMeta or a legacy
	// mandatory ModuleTemplate names is not a semantic version, so it can be
	// neither looked up reliably nor compared against what is installed.
	ErrInvalidVersion = errors.New("version is not a semantic version")

	// ErrTemplateNotFound means the channel (or the mandatory version) points
	// to a version for which no ModuleTemplate is published.
	ErrTemplateNotFound = errors.New("no ModuleTemplate for the version")

	// ErrNotVisible means the module version is beta or internal and the
	// Kyma is not labelled to receive it. Module.Version and Module.Template
	// say what it would have been.
	ErrNotVisible = errors.New("module version not visible to the Kyma")

	// ErrDowngrade means the catalog points to a version lower than the one
	// installed. The installed version stays; Module.Version and
	// Module.Template say what the catalog points to, for status only.
	ErrDowngrade = errors.New("downgrade refused")
)

// resolveError carries a message written for an SRE, which already says what
// kind of failure it is, and unwraps to its sentinel for errors.Is. Wrapping
// with fmt.Errorf("%w: …") would instead prefix every message with the
// sentinel's terse text.
type resolveError struct {
	kind error
	msg  string
}

func (e *resolveError) Error() string { return e.msg }

func (e *resolveError) Unwrap() error { return e.kind }

func newError(kind error, format string, args ...any) error {
	return &resolveError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

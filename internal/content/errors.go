package content

import (
	"fmt"
	"unicode/utf8"
)

// maxErrorText bounds a content error as it reaches a Manifest's or
// Kyma's status and events: parts of it (links, registry error codes,
// template errors) are chosen by module teams and registries.
const maxErrorText = 1024

const truncatedMark = " … (truncated)"

// bounded cuts an error's text to maxErrorText, keeping what it wraps.
func bounded(err error) error {
	if err == nil || len(err.Error()) <= maxErrorText {
		return err
	}
	return &boundedError{err: err}
}

type boundedError struct{ err error }

func (e *boundedError) Error() string {
	text := e.err.Error()
	cut := maxErrorText - len(truncatedMark)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + truncatedMark
}

func (e *boundedError) Unwrap() error { return e.err }

// Stages of the pipeline a PartError names.
const (
	StageFetch  = "fetching"
	StageRender = "rendering"
)

// PartError says which part of a module's content failed, and at which
// stage, so that a status can say so in a stable sentence while the
// wrapped error (its text chosen by registries and module teams) goes to
// events.
type PartError struct {
	// Stage is StageFetch or StageRender.
	Stage string
	// Part is the content resource's name, e.g. rawManifest.
	Part string
	Err  error
}

func (e *PartError) Error() string { return fmt.Sprintf("%s %s: %v", e.Stage, e.Part, e.Err) }

func (e *PartError) Unwrap() error { return e.Err }

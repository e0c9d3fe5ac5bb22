package content

import "unicode/utf8"

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

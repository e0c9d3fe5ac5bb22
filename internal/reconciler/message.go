package reconciler

import (
	"unicode/utf8"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// truncated ends a message that was cut.
const truncated = " … (truncated)"

// BoundMessage returns s when it has at most v1beta2.MaxMessageLength
// characters, else its beginning, cut on a character boundary, followed by
// " … (truncated)", v1beta2.MaxMessageLength characters in all. Characters
// are counted as the API server counts a CRD's maxLength: runes.
func BoundMessage(s string) string {
	if len(s) <= v1beta2.MaxMessageLength || utf8.RuneCountInString(s) <= v1beta2.MaxMessageLength {
		return s
	}
	keep := v1beta2.MaxMessageLength - utf8.RuneCountInString(truncated)
	for i := range s {
		if keep == 0 {
			return s[:i] + truncated
		}
		keep--
	}
	return s // not reached: s has more runes than kept
}

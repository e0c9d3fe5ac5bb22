package content

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
)

func TestBoundedErrorText(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name      string
		err       error
		truncated bool
	}{
		{name: "nil", err: nil},
		{name: "short", err: fmt.Errorf("fetching rawManifest: %w", cause)},
		{name: "exactly the bound", err: fmt.Errorf("%s%w", strings.Repeat("a", maxErrorText-len("cause")), cause)},
		{name: "long", err: fmt.Errorf("link %s: %w", strings.Repeat("x", 3000), cause), truncated: true},
		{name: "long with multi-byte text at the cut", err: fmt.Errorf("%s: %w", strings.Repeat("ä", 2000), cause), truncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := bounded(tt.err)
			if tt.err == nil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(len(got.Error())).To(BeNumerically("<=", maxErrorText))
			g.Expect(utf8.ValidString(got.Error())).To(BeTrue())
			g.Expect(got).To(MatchError(cause), "what the error wraps is kept")
			if tt.truncated {
				g.Expect(got.Error()).To(HaveSuffix(truncatedMark))
			} else {
				g.Expect(got.Error()).To(Equal(tt.err.Error()))
			}
		})
	}
}

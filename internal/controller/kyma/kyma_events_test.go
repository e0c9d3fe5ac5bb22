package kyma

import (
	"fmt"
	"strings"
	"testing"
)

func TestModuleChangesNote(t *testing.T) {
	many := &moduleChanges{}
	for i := range 12 {
		many.install(fmt.Sprintf("m%02d", i), "1.0.0")
	}
	mixed := &moduleChanges{}
	mixed.install("a", "1.0.0")
	mixed.upgrade("b", "1.0.0", "2.0.0")
	mixed.remove("c")
	mixed.remove("d")
	removals := &moduleChanges{}
	removals.remove("c")

	for _, tc := range []struct {
		name    string
		changes *moduleChanges
		want    string
	}{
		{"nothing changed, no event", &moduleChanges{}, ""},
		{"one kind", removals, "Removing 1 module: c"},
		{"every kind in one note", mixed, "Installing 1 module: a 1.0.0; upgrading 1 module: b 1.0.0 to 2.0.0; removing 2 modules: c, d"},
		{"long lists are counted", many, "Installing 12 modules: " + names(10) + " and 2 more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.changes.note(); got != tc.want {
				t.Fatalf("note() = %q, want %q", got, tc.want)
			}
		})
	}
}

func names(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%02d 1.0.0", i)
	}
	return strings.Join(out, ", ")
}

package reconciler

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestBoundMessage(t *testing.T) {
	limit := v1beta2.MaxMessageLength
	tests := []struct {
		name    string
		message string
		cut     bool
	}{
		{name: "short", message: "Module is installed and ready"},
		{name: "empty", message: ""},
		{name: "exactly the limit", message: strings.Repeat("x", limit)},
		{name: "the limit in multi-byte characters", message: strings.Repeat("é", limit)},
		{name: "one over the limit", message: strings.Repeat("x", limit+1), cut: true},
		{name: "long, multi-byte", message: strings.Repeat("日本語のエラー ", 3000), cut: true},
		{name: "long, mixed widths", message: strings.Repeat("a€𝄞", 2000), cut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BoundMessage(tt.message)
			if !tt.cut {
				if got != tt.message {
					t.Fatalf("a message within the bound was changed: %d runes became %d", utf8.RuneCountInString(tt.message), utf8.RuneCountInString(got))
				}
				return
			}
			if n := utf8.RuneCountInString(got); n != limit {
				t.Fatalf("cut to %d characters, want %d", n, limit)
			}
			if !utf8.ValidString(got) {
				t.Fatal("cut inside a character")
			}
			if !strings.HasSuffix(got, " … (truncated)") {
				t.Fatalf("no marker at the end: %q", got[len(got)-40:])
			}
			if kept := strings.TrimSuffix(got, " … (truncated)"); !strings.HasPrefix(tt.message, kept) {
				t.Fatal("the kept part is not the message's beginning")
			}
		})
	}
}

// TestConditionMessagesAreBounded: an outcome whose message quotes a long
// text (a module's own status) is recorded bounded in every condition.
func TestConditionMessagesAreBounded(t *testing.T) {
	long := "Sample kyma-system/default is not ready: " + strings.Repeat("the module's operator says ", 2000)
	for _, o := range []Outcome{
		Progressing("Processing", long, 0),
		Stalled("OwnershipConflict", long, errors.New("conflict")),
		Warning(long, 0),
	} {
		var conditions []metav1.Condition
		SetConditions(&conditions, 1, o)
		for _, typ := range []string{v1beta2.ConditionReady, v1beta2.ConditionReconciling, v1beta2.ConditionStalled} {
			c := meta.FindStatusCondition(conditions, typ)
			if c == nil {
				continue
			}
			if n := utf8.RuneCountInString(c.Message); n != v1beta2.MaxMessageLength {
				t.Errorf("%s outcome: %s message of %d characters, want %d", o.Reason, typ, n, v1beta2.MaxMessageLength)
			}
		}
	}
}

package reconciler_test

import (
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// TestOutcomeResult checks what each kind of outcome tells controller-runtime:
// only a transient failure backs off, a terminal one is never retried, a
// conflict is a quiet short requeue.
func TestOutcomeResult(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name         string
		outcome      reconciler.Outcome
		wantErr      bool
		wantTerminal bool
		wantAfter    bool
	}{
		{"ready requeues after its interval", reconciler.Ready("Ready", "", time.Minute), false, false, true},
		{"progressing requeues after its interval", reconciler.Progressing("Processing", "", time.Second), false, false, true},
		{"retry backs off through the error", reconciler.Retry("ApplyFailed", "Applying failed", boom), true, false, false},
		{"retry after an interval does not back off", reconciler.RetryAfter("ModulesFailed", "A module is in Error", time.Minute, nil), false, false, true},
		{"stalled is terminal", reconciler.Stalled("KubeconfigRefused", "Fix it", boom), true, true, false},
		{"conflict requeues quietly", reconciler.Conflict(boom), false, false, true},
		{"done ends", reconciler.Done(), false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.outcome.Result()
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if errors.Is(err, reconcile.TerminalError(nil)) != tc.wantTerminal {
				t.Fatalf("terminal = %v, want %v", !tc.wantTerminal, tc.wantTerminal)
			}
			if (res.RequeueAfter > 0) != tc.wantAfter {
				t.Fatalf("RequeueAfter = %s, want set %v", res.RequeueAfter, tc.wantAfter)
			}
		})
	}
}

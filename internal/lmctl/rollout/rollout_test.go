package rollout

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWriteDetail(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	kymas := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s-%02d", prefix, i))
		}
		return out
	}
	halted := Rollout{
		Name: "shop-regular", Module: "shop", Channel: "regular", Phase: "Halted", From: "1.0.0", To: "2.0.0",
		Template: "kcp-system/shop-2.0.0@42", Wave: 2, Total: 60, Done: 25, Pending: 30, FailedCount: 3,
		InFlight: []string{"kyma-a", "kyma-b"}, Failed: []string{"kyma-c", "kyma-d", "kyma-e"},
		HaltReason: "3 of 60 runtimes failed at 2.0.0, more than maxFailures allows (2): kyma-c, kyma-d, kyma-e",
		ResumedBy:  "alice at 2026-12-03T09:00:00Z (lmctl rollout resume): canary fixed", ResumedAt: ago(3 * time.Hour),
		StartedAt: ago(4 * time.Hour), WaveStartedAt: ago(20 * time.Minute), Created: now.Add(-48 * time.Hour), PlannedAt: ago(12 * time.Second),
		Runtimes: Runtimes{
			Done:    kymas("done", 20),
			Failed:  []Runtime{{Kyma: "kyma-c", Reason: "Error at 2.0.0: CRD shops.example.com not established"}, {Kyma: "kyma-d", Reason: "not Ready within progressDeadline (10m0s)"}},
			Pending: []Runtime{{Kyma: "kyma-f", Reason: "outside its maintenance window"}, {Kyma: "kyma-g"}},
		},
		Rollback: &RollbackStatus{By: "bob at 2026-12-03T11:50:00Z (lmctl rollout rollback): loses orders", At: now.Add(-10 * time.Minute), Of: "2.0.0",
			Refused: "2.0.0 does not list 1.0.0 in spec.rollbackTo"},
		Content:    []Content{{Name: "rawManifest", Link: "oci://registry.example.com/shop@sha256:abc"}, {Name: "crds", Link: "oci://registry.example.com/shop-crds@sha256:def"}},
		Conditions: []Condition{{Type: "Ready", Status: "False", Reason: "Halted", Message: "Halted: 3 of 60 runtimes failed"}, {Type: "Stalled", Status: "True", Reason: "Halted"}},
	}
	tests := []struct {
		name     string
		rollout  Rollout
		want     []string
		wantNone []string
	}{
		{
			name:    "halted, with a refused rollback",
			rollout: halted,
			want: []string{
				"Rollout shop-regular: module shop, channel regular, 1.0.0 → 2.0.0\n",
				"Phase:     Halted, wave 2\n",
				"Progress:  [############..................] 25/60 done, 2 in flight, 30 pending, 3 failed\n",
				"Wave:      started 2026-12-03T11:40:00Z (20m0s ago)\n",
				"In flight: kyma-a, kyma-b\n",
				"Failed:    kyma-c: Error at 2.0.0: CRD shops.example.com not established\n" +
					"           kyma-d: not Ready within progressDeadline (10m0s)\n" +
					"           … and 1 more\n",
				"Pending:   kyma-f: outside its maintenance window\n           kyma-g\n           … and 28 more\n",
				"Done:      done-00, done-01, done-02, ",
				"done-19, … and 5 more\n",
				"Halted:    3 of 60 runtimes failed at 2.0.0",
				"Resumed:   alice at 2026-12-03T09:00:00Z (lmctl rollout resume): canary fixed, 3h0m0s ago\n",
				"Rollback:  bob at 2026-12-03T11:50:00Z (lmctl rollout rollback): loses orders, 10m0s ago, of 2.0.0; REFUSED: 2.0.0 does not list 1.0.0 in spec.rollbackTo\n",
				"Template:  kcp-system/shop-2.0.0@42\n",
				"Content:   rawManifest oci://registry.example.com/shop@sha256:abc\n           crds oci://registry.example.com/shop-crds@sha256:def\n",
				"Planner:   looked 12s ago\n",
				"Status:    Ready=False Halted: Halted: 3 of 60 runtimes failed\n           Stalled=True Halted\n",
			},
		},
		{
			name: "progressing, no planner for 7 minutes",
			rollout: Rollout{Name: "shop-regular", Module: "shop", Channel: "regular", Phase: "Progressing", From: "1.0.0", To: "2.0.0",
				Wave: 0, Total: 10, Pending: 8, InFlight: []string{"kyma-a", "kyma-b"}, Created: now.Add(-time.Hour), PlannedAt: ago(7 * time.Minute),
				WaveStartedAt: ago(8 * time.Minute), WaveReadyAt: ago(7 * time.Minute), Soak: "10m0s"},
			want: []string{
				"Phase:     Progressing, wave canary\n",
				"Wave:      started 2026-12-03T11:52:00Z (8m0s ago); all Ready 7m0s ago, soaking for 10m0s\n",
				"Pending:   8, none named\n",
				"Planner:   no planner has looked for 7m0s (last at 2026-12-03T11:53:00Z): every runtime holds the module",
			},
			wantNone: []string{"Failed:", "Done:", "Halted:", "Rollback:", "Resumed:"},
		},
		{
			name:    "never planned",
			rollout: Rollout{Name: "base", Module: "base", Created: now.Add(-10 * time.Minute), Wave: -1},
			want: []string{
				"Rollout base: module base, mandatory (no channel), - → -\n",
				"Phase:     -, wave -\n",
				"Planner:   no planner has looked for 10m0s (since the rollout was created)",
			},
		},
		{
			name: "completed long ago: an old plan is no alarm",
			rollout: Rollout{Name: "shop-regular", Module: "shop", Channel: "regular", Phase: "Completed", To: "2.0.0", Total: 3, Done: 3,
				Created: now.Add(-48 * time.Hour), PlannedAt: ago(3 * time.Hour), CompletedAt: ago(3 * time.Hour), Runtimes: Runtimes{Done: kymas("k", 3)}},
			want:     []string{"Planner:   looked 3h0m0s ago\n", "Done:      k-00, k-01, k-02\n", "Completed: 2026-12-03T09:00:00Z (3h0m0s ago)\n"},
			wantNone: []string{"no planner", "… and", "Wave:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteDetail(&b, tt.rollout, now); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("the output has no %q:\n%s", want, out)
				}
			}
			for _, unwanted := range tt.wantNone {
				if strings.Contains(out, unwanted) {
					t.Errorf("the output has %q:\n%s", unwanted, out)
				}
			}
		})
	}
}

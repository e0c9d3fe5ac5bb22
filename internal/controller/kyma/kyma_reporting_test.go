package kyma

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// reportedKymas answers ReportsKyma from a fixed set.
type reportedKymas map[string]bool

func (r reportedKymas) ReportsKyma(_ context.Context, kymaName string) bool { return r[kymaName] }

// TestReadyKymaIsLookedAtLessOftenWhileReported: only a Ready Kyma whose
// runtime reports changes to its own Kyma waits ReportedReadyFactor Ready
// intervals; other states and unreported Kymas keep their interval.
func TestReadyKymaIsLookedAtLessOftenWhileReported(t *testing.T) {
	r := &Reconciler{Reporting: reportedKymas{"reported": true}, ReportedReadyFactor: 6}
	ready := reconciler.Ready(ReasonReady, "All modules are ready", time.Minute)
	progressing := reconciler.Progressing(ReasonModulesNotReady, "1 module is not ready yet", time.Second)
	kyma := func(name string) *v1beta2.Kyma { return &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name}} }

	tests := []struct {
		name string
		r    *Reconciler
		kyma string
		o    reconciler.Outcome
		want time.Duration
	}{
		{"Ready and reported", r, "reported", ready, 6 * time.Minute},
		{"Ready, not reported", r, "silent", ready, time.Minute},
		{"reported, not Ready", r, "reported", progressing, time.Second},
		{"factor 1", &Reconciler{Reporting: reportedKymas{"reported": true}, ReportedReadyFactor: 1}, "reported", ready, time.Minute},
		{"no watcher", &Reconciler{ReportedReadyFactor: 6}, "reported", ready, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.readyAfter(context.Background(), kyma(tt.kyma), tt.o).After; got != tt.want {
				t.Fatalf("After = %s, want %s", got, tt.want)
			}
		})
	}
}

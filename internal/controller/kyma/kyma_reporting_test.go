package kyma

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

// reportedKymas answers ReportsKyma from a fixed set.
type reportedKymas map[string]bool

func (r reportedKymas) ReportsKyma(_ context.Context, kymaName string) bool { return r[kymaName] }

// TestReadyKymaIsLookedAtLessOftenWhileReported: only a Ready Kyma whose
// runtime reports changes to its own Kyma waits ReportedReadyFactor Ready
// intervals; other states and unreported Kymas keep their interval. A Ready
// Kyma's look falls on its Manifests' check moments (requeue.Aligned by its
// name), so that one runtime connection serves both.
func TestReadyKymaIsLookedAtLessOftenWhileReported(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(now)
	intervals := requeue.Intervals{Ready: time.Minute}
	r := &Reconciler{Reporting: reportedKymas{"reported": true}, ReportedReadyFactor: 6, Intervals: intervals, Clock: clock}
	ready := reconciler.Ready(ReasonReady, "All modules are ready", 55*time.Second)
	progressing := reconciler.Progressing(ReasonModulesNotReady, "1 module is not ready yet", time.Second)
	kyma := func(name string) *v1beta2.Kyma { return &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name}} }

	tests := []struct {
		name string
		r    *Reconciler
		kyma string
		o    reconciler.Outcome
		want time.Duration
	}{
		{"Ready and reported", r, "reported", ready, requeue.Aligned(6*time.Minute, "reported", now)},
		{"Ready, not reported", r, "silent", ready, requeue.Aligned(time.Minute, "silent", now)},
		{"reported, not Ready", r, "reported", progressing, time.Second},
		{"factor 1", &Reconciler{Reporting: reportedKymas{"reported": true}, ReportedReadyFactor: 1, Intervals: intervals, Clock: clock}, "reported", ready, requeue.Aligned(time.Minute, "reported", now)},
		{"no watcher", &Reconciler{ReportedReadyFactor: 6, Intervals: intervals, Clock: clock}, "reported", ready, requeue.Aligned(time.Minute, "reported", now)},
		{"no periodic look", &Reconciler{Clock: clock}, "reported", ready, 55 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.readyAfter(context.Background(), kyma(tt.kyma), tt.o).After; got != tt.want {
				t.Fatalf("After = %s, want %s", got, tt.want)
			}
		})
	}
	// Aligned: the look comes at the moment the Manifests' checks are due,
	// a phase of the Kyma's own, and whole intervals apart.
	first := r.readyAfter(context.Background(), kyma("silent"), ready).After
	clock.SetTime(now.Add(first))
	if next := r.readyAfter(context.Background(), kyma("silent"), ready).After; next != time.Minute {
		t.Fatalf("a Kyma looked at on its moment waits %s until the next, want one interval", next)
	}
}

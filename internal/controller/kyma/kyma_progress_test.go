package kyma

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// progressStatus is a Kyma status as recordOutcome leaves it for o, with
// modules in the given states.
func progressStatus(o reconciler.Outcome, generation int64, states ...v1beta2.State) *v1beta2.KymaStatus {
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
	for i, state := range states {
		kyma.Status.Modules = append(kyma.Status.Modules, v1beta2.ModuleStatus{Name: string(rune('a' + i)), State: state})
	}
	recordOutcome(kyma, o)
	return &kyma.Status
}

func TestProgressOnlyTellsProgressFromNews(t *testing.T) {
	notReady := func(n int) reconciler.Outcome {
		return reconciler.Progressing(ReasonModulesNotReady, string(rune('0'+n))+" modules are not ready yet", time.Second)
	}
	const P, R, E, W = v1beta2.StateProcessing, v1beta2.StateReady, v1beta2.StateError, v1beta2.StateWarning
	stored := progressStatus(notReady(3), 1, P, P, P)
	cases := []struct {
		name     string
		stored   *v1beta2.KymaStatus
		computed *v1beta2.KymaStatus
		o        reconciler.Outcome
		want     bool
	}{
		{"one more module ready", stored, progressStatus(notReady(2), 1, R, P, P), notReady(2), true},
		{"nothing changed", stored, progressStatus(notReady(3), 1, P, P, P), notReady(3), true},
		{"the first status after the announcement", progressStatus(reconciler.Progressing(ReasonReconcileStarted, "connecting", time.Second), 1),
			progressStatus(notReady(3), 1, P, P, P), notReady(3), false},
		{"a module added", stored, progressStatus(notReady(4), 1, P, P, P, P), notReady(4), false},
		{"a module in Warning", stored, progressStatus(notReady(2), 1, W, P, P), notReady(2), false},
		{"a module in Error", stored, progressStatus(notReady(2), 1, E, P, P), notReady(2), false},
		{"a new generation", stored, progressStatus(notReady(3), 2, P, P, P), notReady(3), false},
		{"all ready", stored, progressStatus(reconciler.Ready(ReasonReady, "All modules are ready", time.Second), 1, R, R, R),
			reconciler.Ready(ReasonReady, "All modules are ready", time.Second), false},
	}
	for _, c := range cases {
		if got := progressOnly(c.stored, c.computed, c.o); got != c.want {
			t.Errorf("%s: progressOnly = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestProgressIsWrittenOncePerInterval(t *testing.T) {
	const P, R = v1beta2.StateProcessing, v1beta2.StateReady
	notReady := reconciler.Progressing(ReasonModulesNotReady, "not ready yet", time.Second)
	stored := progressStatus(notReady, 1, P, P, P)
	progress := progressStatus(notReady, 1, R, P, P)
	p := newProgressWrites(10 * time.Second)
	uid := types.UID("kyma")
	start := time.Unix(1000, 0)

	if p.hold(uid, stored, progress, notReady, start) {
		t.Fatal("the first progress of a Kyma is held; want it written")
	}
	if !p.hold(uid, stored, progress, notReady, start.Add(5*time.Second)) {
		t.Error("progress 5s after a write is written; want it held")
	}
	if p.hold(uid, stored, progress, notReady, start.Add(11*time.Second)) {
		t.Error("progress 11s after a write is held; want it written")
	}
	ready := reconciler.Ready(ReasonReady, "All modules are ready", time.Second)
	if p.hold(uid, stored, progressStatus(ready, 1, R, R, R), ready, start.Add(12*time.Second)) {
		t.Error("Ready is held; want it written at once")
	}
	if p.hold(uid, stored, progress, notReady, start.Add(13*time.Second)) {
		t.Error("progress after Ready (the interval begins anew) is held; want it written")
	}
}

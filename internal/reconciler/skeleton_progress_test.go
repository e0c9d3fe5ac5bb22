package reconciler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// progressRun names each run's Manifest anew (go test -count).
var progressRun atomic.Int64

// TestReportProgressIsStoredDuringTheReconcile: each progress a phase
// reports is in the stored status while the phase still runs, and the
// phase's own outcome is written on top under the lock of the last
// report, not refused as a conflict. Outside a phase there is nothing to
// report to.
func TestReportProgressIsStoredDuringTheReconcile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := fmt.Sprintf("progressing-%d", progressRun.Add(1))
	newManifest(t, name)

	var seen []string
	work := func(ctx context.Context, m *v1beta2.Manifest) reconciler.Outcome {
		for _, step := range []string{"1 of 2 done", "2 of 2 done"} {
			g.Expect(reconciler.ReportProgress(ctx, reconciler.Progressing("Working", step, 0))).To(BeTrue())
			stored := get(g, m.Name)
			seen = append(seen, meta.FindStatusCondition(stored.Status.Conditions, v1beta2.ConditionReady).Message)
		}
		return reconciler.Ready("Ready", "Module is installed and ready", time.Minute)
	}
	result, err := reconciler.Run(ctx, kcp, get(g, name), phases("", work, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(ctrl.Result{RequeueAfter: time.Minute}), "the reconcile's outcome, not a conflict")
	g.Expect(seen).To(Equal([]string{"1 of 2 done", "2 of 2 done"}))
	g.Expect(get(g, name).Status.State).To(Equal(v1beta2.StateReady))

	g.Expect(reconciler.ReportProgress(ctx, reconciler.Progressing("Working", "nowhere", 0))).To(BeFalse())
}

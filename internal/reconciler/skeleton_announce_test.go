package reconciler_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// TestAnnounceIsStoredBeforeTheReconcile: an object without status shows
// Processing while its first, slow reconcile still runs; the reconcile's
// own outcome is then written on top under the lock the announcement
// holds, not refused as a conflict. An object with a status is not
// announced again: nothing is written before its reconcile.
func TestAnnounceIsStoredBeforeTheReconcile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newManifest(t, "announced")

	var seenDuringReconcile *v1beta2.Manifest
	ready := func(_ context.Context, m *v1beta2.Manifest) reconciler.Outcome {
		seenDuringReconcile = get(g, m.Name)
		return reconciler.Ready("Ready", "Module is installed and ready", time.Minute)
	}
	p := phases("", ready, nil)
	p.Announce = func(m *v1beta2.Manifest) (reconciler.Outcome, bool) {
		return reconciler.Progressing("Started", "Work began", 0), m.Status.State == ""
	}

	result, err := reconciler.Run(ctx, kcp, get(g, "announced"), p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(ctrl.Result{RequeueAfter: time.Minute}), "the reconcile's outcome, not a conflict")
	g.Expect(seenDuringReconcile.Status.State).To(Equal(v1beta2.StateProcessing), "the announcement is stored before the reconcile runs")
	g.Expect(seenDuringReconcile.Status.Conditions).To(ContainElement(HaveField("Reason", "Started")))
	g.Expect(get(g, "announced").Status.State).To(Equal(v1beta2.StateReady))

	before := get(g, "announced")
	_, err = reconciler.Run(ctx, kcp, before, p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seenDuringReconcile.ResourceVersion).To(Equal(before.ResourceVersion), "an object with a status is not announced again")
}

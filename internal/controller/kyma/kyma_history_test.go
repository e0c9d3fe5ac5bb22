package kyma

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// A removal is on the module's entry while under way, with the Manifest's
// own record once it has one, and in status.operations once the module is
// gone; the list stays bounded.
func TestRemovalsInTheHistory(t *testing.T) {
	g := NewWithT(t)
	kyma := &v1beta2.Kyma{}
	kyma.Name = "k"
	start := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))

	// The Kyma controller deletes the Manifest: the entry turns Deleting.
	// Its status entry shows the version that failed to install (2.0.0);
	// the Manifest's history says 1.0.0 is what is installed.
	kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "shop", Version: "2.0.0", State: v1beta2.StateDeleting}, {Name: "kept", State: v1beta2.StateReady}}
	failedUpgrade := &v1beta2.Manifest{}
	failedUpgrade.Status.Operations = []v1beta2.Operation{
		{Type: v1beta2.OperationUpgrade, FromVersion: "1.0.0", ToVersion: "2.0.0", Result: v1beta2.OperationFailed},
		{Type: v1beta2.OperationInstall, ToVersion: "1.0.0", Result: v1beta2.OperationReady},
	}
	noteRemovals(kyma, nil, map[string]*v1beta2.Manifest{ManifestName("k", "shop"): failedUpgrade}, start)
	removal := kyma.Status.Modules[0].Removal
	g.Expect(removal).NotTo(BeNil())
	g.Expect(*removal).To(Equal(v1beta2.Operation{Module: "shop", Type: v1beta2.OperationRemoval, FromVersion: "1.0.0", StartedAt: start, Result: v1beta2.OperationInProgress}))
	g.Expect(kyma.Status.Modules[1].Removal).To(BeNil())

	// The Manifest's controller records its own view: a failure, retrying.
	manifest := &v1beta2.Manifest{}
	manifest.Status.Operations = []v1beta2.Operation{{Type: v1beta2.OperationRemoval, FromVersion: "1.0.0", StartedAt: start, Result: v1beta2.OperationError, Code: "DeleteFailed"}}
	previous := append([]v1beta2.ModuleStatus(nil), kyma.Status.Modules...)
	noteRemovals(kyma, previous, map[string]*v1beta2.Manifest{ManifestName("k", "shop"): manifest}, metav1.NewTime(start.Add(time.Minute)))
	g.Expect(kyma.Status.Modules[0].Removal.Code).To(Equal("DeleteFailed"))
	g.Expect(kyma.Status.Modules[0].Removal.Module).To(Equal("shop"))

	// The Manifest is gone: the module leaves status.modules, its removal
	// ends Ready in status.operations.
	previous = append([]v1beta2.ModuleStatus(nil), kyma.Status.Modules...)
	kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "kept", State: v1beta2.StateReady}}
	done := metav1.NewTime(start.Add(2 * time.Minute))
	noteRemovals(kyma, previous, nil, done)
	g.Expect(kyma.Status.Operations).To(HaveLen(1))
	op := kyma.Status.Operations[0]
	g.Expect(op.Module).To(Equal("shop"))
	g.Expect(op.Result).To(Equal(v1beta2.OperationReady))
	g.Expect(op.Code).To(BeEmpty())
	g.Expect(op.StartedAt).To(Equal(start))
	g.Expect(op.FinishedAt).To(Equal(&done))

	// A module that leaves status.modules without a removal (it was not
	// Deleting) records nothing; the list keeps the newest.
	for range v1beta2.MaxKymaOperations + 3 {
		kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "again", State: v1beta2.StateDeleting}}
		previous = append([]v1beta2.ModuleStatus(nil), kyma.Status.Modules...)
		kyma.Status.Modules = nil
		noteRemovals(kyma, previous, nil, done)
	}
	g.Expect(kyma.Status.Operations).To(HaveLen(v1beta2.MaxKymaOperations))
	g.Expect(kyma.Status.Operations[0].Module).To(Equal("again"))
	noteRemovals(kyma, []v1beta2.ModuleStatus{{Name: "vanished", State: v1beta2.StateReady}}, nil, done)
	g.Expect(kyma.Status.Operations[0].Module).To(Equal("again"))
}

// A stored removal ends when its Manifest is gone, whatever the module's
// entry now says (it may be asked for again), and is dropped when the
// Manifest is still there and not being deleted: the removal never began.
func TestRemovalsEndWithTheirManifest(t *testing.T) {
	g := NewWithT(t)
	kyma := &v1beta2.Kyma{}
	kyma.Name = "k"
	start := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	done := metav1.NewTime(start.Add(time.Minute))
	removal := &v1beta2.Operation{Module: "shop", Type: v1beta2.OperationRemoval, FromVersion: "1.0.0", StartedAt: start, Result: v1beta2.OperationInProgress}
	stored := []v1beta2.ModuleStatus{{Name: "shop", State: v1beta2.StateDeleting, Removal: removal}}

	// Asked for again, its Manifest gone: the removal is done.
	kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "shop", State: v1beta2.StateProcessing}}
	noteRemovals(kyma, stored, nil, done)
	g.Expect(kyma.Status.Operations).To(ConsistOf(And(HaveField("Module", "shop"), HaveField("Result", v1beta2.OperationReady), HaveField("FinishedAt", &done))))
	g.Expect(kyma.Status.Modules[0].Removal).To(BeNil())

	// Asked for again before its Manifest was deleted: nothing happened.
	kyma.Status.Operations = nil
	kyma.Status.Modules = []v1beta2.ModuleStatus{{Name: "shop", State: v1beta2.StateReady}}
	noteRemovals(kyma, stored, map[string]*v1beta2.Manifest{ManifestName("k", "shop"): {}}, done)
	g.Expect(kyma.Status.Operations).To(BeEmpty())
	g.Expect(kyma.Status.Modules[0].Removal).To(BeNil())
}

// Only a stored removal lets a Manifest be deleted or a new one be made.
func TestRemovalNoted(t *testing.T) {
	g := NewWithT(t)
	stored := []v1beta2.ModuleStatus{{Name: "shop", State: v1beta2.StateDeleting, Removal: &v1beta2.Operation{}}, {Name: "kept", State: v1beta2.StateDeleting}}
	g.Expect(removalNoted(stored, "shop")).To(BeTrue())
	g.Expect(removalNoted(stored, "kept")).To(BeFalse(), "Deleting alone is not a stored removal")
	g.Expect(removalNoted(stored, "other")).To(BeFalse())
}

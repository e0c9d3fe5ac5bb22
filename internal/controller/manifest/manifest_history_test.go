package manifest

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// history drives a Manifest through outcomes as the skeleton would: the
// generation moves with the spec, record and noteOperation run on each
// outcome, the clock moves a minute per step.
type history struct {
	m   *v1beta2.Manifest
	now time.Time
}

// newHistory starts a Manifest at version 1.0.0, not yet applied.
func newHistory() *history {
	m := &v1beta2.Manifest{}
	m.Generation = 1
	m.Spec.Version = "1.0.0"
	return &history{m: m, now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
}

func (h *history) upgrade(version string) {
	h.m.Spec.Version = version
	h.m.Generation++
}

// step records o and tells whether the status changed.
func (h *history) step(o reconciler.Outcome, seen operationSeen) bool {
	before := h.m.Status.DeepCopy()
	seen.stateBefore, seen.observedBefore = h.m.Status.State, h.m.Status.ObservedGeneration
	h.now = h.now.Add(time.Minute)
	record(h.m, o, time.Now())
	noteOperation(h.m, o, seen, h.now)
	return !equality.Semantic.DeepEqual(before, &h.m.Status)
}

var (
	processing = readinessOutcome(apply.Readiness{State: v1beta2.StateProcessing, Message: "manager starting"}, testIntervals)
	ready      = readinessOutcome(apply.Readiness{State: v1beta2.StateReady}, testIntervals)
)

func TestHistoryOfInstallUpgradeAndDriftRepair(t *testing.T) {
	g := NewWithT(t)
	h := newHistory()

	h.step(processing, operationSeen{})
	g.Expect(h.m.Status.Operations).To(HaveLen(1))
	install := h.m.Status.Operations[0]
	g.Expect(install.Type).To(Equal(v1beta2.OperationInstall))
	g.Expect(install.ToVersion).To(Equal("1.0.0"))
	g.Expect(install.Result).To(Equal(v1beta2.OperationInProgress))
	g.Expect(install.FinishedAt).To(BeNil())
	started := install.StartedAt

	h.step(ready, operationSeen{})
	install = h.m.Status.Operations[0]
	g.Expect(h.m.Status.Operations).To(HaveLen(1), "the same install, now Ready")
	g.Expect(install.Result).To(Equal(v1beta2.OperationReady))
	g.Expect(install.StartedAt).To(Equal(started))
	g.Expect(install.FinishedAt).NotTo(BeNil())

	// A periodic check that finds everything Ready changes nothing: no
	// status write.
	g.Expect(h.step(ready, operationSeen{})).To(BeFalse())

	// An upgrade that fails once (retrying by itself), then succeeds.
	h.upgrade("2.0.0")
	h.step(reconciler.Retry(ReasonApplyFailed, "Applying failed", errors.New("boom")), operationSeen{})
	upgrade := h.m.Status.Operations[0]
	g.Expect(upgrade.Type).To(Equal(v1beta2.OperationUpgrade))
	g.Expect(upgrade.FromVersion).To(Equal("1.0.0"))
	g.Expect(upgrade.ToVersion).To(Equal("2.0.0"))
	g.Expect(upgrade.Result).To(Equal(v1beta2.OperationError))
	g.Expect(upgrade.Code).To(Equal(ReasonApplyFailed))
	// The same failure again writes nothing.
	g.Expect(h.step(reconciler.Retry(ReasonApplyFailed, "Applying failed", errors.New("boom")), operationSeen{})).To(BeFalse())
	h.step(ready, operationSeen{})
	g.Expect(h.m.Status.Operations).To(HaveLen(2))
	g.Expect(h.m.Status.Operations[0].Result).To(Equal(v1beta2.OperationReady))
	g.Expect(h.m.Status.Operations[0].Code).To(BeEmpty())

	// Someone changed the module's objects; the reconcile put them back.
	h.step(ready, operationSeen{driftRepaired: true})
	g.Expect(h.m.Status.Operations).To(HaveLen(3))
	repair := h.m.Status.Operations[0]
	g.Expect(repair.Type).To(Equal(v1beta2.OperationDriftRepair))
	g.Expect(repair.FromVersion).To(Equal("2.0.0"))
	g.Expect(repair.Result).To(Equal(v1beta2.OperationReady))

	// A module that turns Error by itself is not an operation.
	g.Expect(h.step(readinessOutcome(apply.Readiness{State: v1beta2.StateError, Message: "crashed"}, testIntervals), operationSeen{})).To(BeTrue())
	g.Expect(h.m.Status.Operations).To(HaveLen(3))
}

// Failed (needs a human) is told from Error (retrying); an operation that
// a newer version supersedes ends as far as it got.
func TestHistoryFailedAndSuperseded(t *testing.T) {
	g := NewWithT(t)
	h := newHistory()
	h.step(ready, operationSeen{})
	h.upgrade("2.0.0")
	h.step(reconciler.Stalled(ReasonAccessRefused, "refused", errors.New("forbidden")), operationSeen{})
	failed := h.m.Status.Operations[0]
	g.Expect(failed.Result).To(Equal(v1beta2.OperationFailed))
	g.Expect(failed.Code).To(Equal(ReasonAccessRefused))

	h.upgrade("3.0.0")
	h.step(processing, operationSeen{})
	g.Expect(h.m.Status.Operations).To(HaveLen(3))
	g.Expect(h.m.Status.Operations[0].ToVersion).To(Equal("3.0.0"))
	g.Expect(h.m.Status.Operations[0].FromVersion).To(Equal("1.0.0"), "2.0.0 was never installed")
	superseded := h.m.Status.Operations[1]
	g.Expect(superseded.ToVersion).To(Equal("2.0.0"))
	g.Expect(superseded.Result).To(Equal(v1beta2.OperationFailed))
	g.Expect(superseded.FinishedAt).NotTo(BeNil())
}

func TestHistoryOfRemovalAndDeletion(t *testing.T) {
	for _, typ := range []v1beta2.OperationType{v1beta2.OperationRemoval, v1beta2.OperationDeletion} {
		t.Run(string(typ), func(t *testing.T) {
			g := NewWithT(t)
			h := newHistory()
			h.step(ready, operationSeen{})
			h.m.DeletionTimestamp = &metav1.Time{Time: h.now}
			h.step(reconciler.Deleting(ReasonDeletingCustomResources, "finalizing", time.Second), operationSeen{removal: typ})
			op := h.m.Status.Operations[0]
			g.Expect(op.Type).To(Equal(typ))
			g.Expect(op.FromVersion).To(Equal("1.0.0"))
			g.Expect(op.ToVersion).To(BeEmpty())
			g.Expect(op.Result).To(Equal(v1beta2.OperationInProgress))
			h.step(reconciler.Retry(ReasonDeleteFailed, "failed", errors.New("boom")), operationSeen{removal: typ})
			g.Expect(h.m.Status.Operations).To(HaveLen(2))
			g.Expect(h.m.Status.Operations[0].Result).To(Equal(v1beta2.OperationError))
		})
	}
}

// A Manifest installed before the operator kept operations records no
// install when the new operator looks at it, and the history stays
// bounded.
func TestHistoryExistingManifestAndBound(t *testing.T) {
	g := NewWithT(t)
	h := newHistory()
	h.m.Status.State = v1beta2.StateReady
	h.m.Status.ObservedGeneration = 1
	g.Expect(h.step(ready, operationSeen{})).To(BeTrue(), "conditions are new")
	g.Expect(h.m.Status.Operations).To(BeEmpty())

	for i := range 2 * v1beta2.MaxManifestOperations {
		h.step(ready, operationSeen{driftRepaired: true})
		g.Expect(len(h.m.Status.Operations)).To(Equal(min(i+1, v1beta2.MaxManifestOperations)))
	}
}

package controller

import (
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// TestWatcherStatus records each Watcher's outcome and checks what kstatus,
// `kubectl wait --for=condition=Ready` and status.state make of it: a valid
// Watcher is Current and Ready; one the runtimes' API servers would refuse
// is Failed (Stalled=True, reason Invalid) with a message naming the field
// and the fix.
func TestWatcherStatus(t *testing.T) {
	withResource := func(resource string) v1beta2.Watcher {
		w := testWatcher("w", v1beta2.SpecField, nil)
		w.Spec.ResourceToWatch.Resource = resource
		return w
	}
	tests := []struct {
		name    string
		watcher v1beta2.Watcher
		kstatus status.Status
		state   v1beta2.State
		reason  string
		mention []string
	}{
		{name: "default", watcher: *DefaultWatcher("kcp-system", 8443), kstatus: status.CurrentStatus, state: v1beta2.StateReady, reason: ReasonInUse},
		{name: "status field", watcher: testWatcher("w", v1beta2.StatusField, map[string]string{"a": "b"}), kstatus: status.CurrentStatus, state: v1beta2.StateReady, reason: ReasonInUse},
		{name: "bad label key", watcher: testWatcher("w", v1beta2.SpecField, map[string]string{"a b": "c"}),
			kstatus: status.FailedStatus, state: v1beta2.StateError, reason: ReasonInvalid, mention: []string{`labelsToWatch key "a b"`, "Fix the spec"}},
		{name: "bad label value", watcher: testWatcher("w", v1beta2.SpecField, map[string]string{"a": "not valid!"}),
			kstatus: status.FailedStatus, state: v1beta2.StateError, reason: ReasonInvalid, mention: []string{`labelsToWatch value "not valid!"`}},
		{name: "subresource as resource", watcher: withResource("kymas/status"),
			kstatus: status.FailedStatus, state: v1beta2.StateError, reason: ReasonInvalid, mention: []string{"resourceToWatch.resource", "field: status"}},
		{name: "name too long for a webhook", watcher: testWatcher(strings.Repeat("w", 240), v1beta2.SpecField, nil),
			kstatus: status.FailedStatus, state: v1beta2.StateError, reason: ReasonInvalid, mention: []string{"choose a shorter name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := tt.watcher.DeepCopy()
			w.Generation = 3
			recordWatcher(w, watcherOutcome(w))

			g.Expect(w.Status.State).To(Equal(tt.state))
			g.Expect(kstatusOf(g, w).Status).To(Equal(tt.kstatus))
			ready := meta.FindStatusCondition(w.Status.Conditions, v1beta2.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(tt.reason))
			// kubectl wait --for=condition=Ready passes exactly for a valid Watcher.
			g.Expect(meta.IsStatusConditionTrue(w.Status.Conditions, v1beta2.ConditionReady)).To(Equal(tt.state == v1beta2.StateReady))
			g.Expect(meta.IsStatusConditionTrue(w.Status.Conditions, v1beta2.ConditionStalled)).To(Equal(tt.kstatus == status.FailedStatus))
			for _, m := range tt.mention {
				g.Expect(ready.Message).To(ContainSubstring(m))
			}
			// Its current spec was looked at, valid or not.
			g.Expect(w.Status.ObservedGeneration).To(Equal(int64(3)))
		})
	}
}

// TestWatcherTurnsInvalidReadsFailed edits a Ready Watcher into an invalid
// one: kstatus must say Failed for the new generation, not "in progress" for
// good because observedGeneration stayed behind; fixing it again is Current.
func TestWatcherTurnsInvalidReadsFailed(t *testing.T) {
	g := NewWithT(t)
	w := testWatcher("w", v1beta2.SpecField, map[string]string{"a": "b"})
	w.Generation = 1
	recordWatcher(&w, watcherOutcome(&w))
	g.Expect(kstatusOf(g, &w).Status).To(Equal(status.CurrentStatus))

	w.Generation = 2
	w.Spec.LabelsToWatch = map[string]string{"not a key": "b"}
	recordWatcher(&w, watcherOutcome(&w))
	g.Expect(kstatusOf(g, &w).Status).To(Equal(status.FailedStatus))
	g.Expect(meta.FindStatusCondition(w.Status.Conditions, v1beta2.ConditionReconciling)).To(BeNil())

	w.Generation = 3
	w.Spec.LabelsToWatch = map[string]string{"a": "c"}
	recordWatcher(&w, watcherOutcome(&w))
	g.Expect(kstatusOf(g, &w).Status).To(Equal(status.CurrentStatus))
	g.Expect(meta.FindStatusCondition(w.Status.Conditions, v1beta2.ConditionStalled)).To(BeNil())
}

// TestInvalidWatcherMessageIsStable checks that a Watcher with several bad
// labels gets the same message every time: map order must not make the
// condition flap (and rewrite the status) on every reconcile.
func TestInvalidWatcherMessageIsStable(t *testing.T) {
	g := NewWithT(t)
	labels := map[string]string{}
	for _, k := range []string{"a b", "c d", "e f", "g h", "i j", "k l"} {
		labels[k] = "x"
	}
	w := testWatcher("w", v1beta2.SpecField, labels)
	first := watcherOutcome(&w).Message
	for range 50 {
		g.Expect(watcherOutcome(&w).Message).To(Equal(first))
	}
}

func kstatusOf(g Gomega, w *v1beta2.Watcher) *status.Result {
	w.APIVersion, w.Kind = v1beta2.GroupVersion.String(), "Watcher"
	raw, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(w)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	g.Expect(err).NotTo(HaveOccurred())
	return res
}

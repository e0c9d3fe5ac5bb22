package reconciler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// TestConditionsReadAsKstatusAndKubectlWait records each kind of outcome on
// a Manifest and checks what kstatus (Flux and Argo health checks), `kubectl
// wait --for=condition=Ready` and KLM's status.state make of it.
func TestConditionsReadAsKstatusAndKubectlWait(t *testing.T) {
	boom := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	cases := []struct {
		name      string
		outcome   reconciler.Outcome
		deleting  bool
		kstatus   status.Status
		waitReady bool
		state     v1beta2.State
	}{
		{"ready", reconciler.Ready("Ready", "Module is installed and ready", time.Minute), false, status.CurrentStatus, true, v1beta2.StateReady},
		{"warning", reconciler.Warning("The module reports a warning", time.Minute), false, status.CurrentStatus, true, v1beta2.StateWarning},
		{"progressing", reconciler.Progressing("Processing", "Waiting for the manager", time.Second), false, status.InProgressStatus, false, v1beta2.StateProcessing},
		{"transient failure", reconciler.Retry("RuntimeUnavailable", "The runtime cannot be reached", boom), false, status.InProgressStatus, false, v1beta2.StateError},
		{"polled failure", reconciler.RetryAfter("ModuleError", "The module's custom resource reports Error", time.Second, nil), false, status.InProgressStatus, false, v1beta2.StateError},
		{"terminal failure", reconciler.Stalled("KubeconfigRefused", "Fix the kubeconfig", boom), false, status.FailedStatus, false, v1beta2.StateError},
		{"deleting", reconciler.Deleting("WaitingForCustomResources", "Delete the custom resources", time.Second), true, status.TerminatingStatus, false, v1beta2.StateDeleting},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "kcp", Generation: 3}}
			m.Status.ObservedGeneration = 3
			if tc.deleting {
				m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			reconciler.Record(reconciler.Status{Conditions: &m.Status.Conditions, State: &m.Status.State, ObservedGeneration: &m.Status.ObservedGeneration}, m.Generation, tc.outcome)

			if m.Status.State != tc.state {
				t.Errorf("status.state = %s, want %s", m.Status.State, tc.state)
			}
			got := kstatusOf(t, m)
			if got.Status != tc.kstatus {
				t.Errorf("kstatus = %s (%s), want %s", got.Status, got.Message, tc.kstatus)
			}
			if ready := conditionTrue(m.Status.Conditions, v1beta2.ConditionReady); ready != tc.waitReady {
				t.Errorf("kubectl wait --for=condition=Ready satisfied = %v, want %v", ready, tc.waitReady)
			}
			for _, c := range m.Status.Conditions {
				if c.Message == boom.Error() || c.Reason == "" {
					t.Errorf("condition %s carries raw error text or no reason: %+v", c.Type, c)
				}
				if c.ObservedGeneration != m.Generation {
					t.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, m.Generation)
				}
			}
		})
	}
}

// TestConditionsMoveBetweenStates records outcomes one after another, as
// reconciles do, and checks that no condition of an earlier state lingers
// (a Stalled=True left behind would make kstatus say Failed for good).
func TestConditionsMoveBetweenStates(t *testing.T) {
	var conds []metav1.Condition
	sequence := []struct {
		outcome reconciler.Outcome
		want    v1beta2.State
	}{
		{reconciler.Progressing("Processing", "Applying", 0), v1beta2.StateProcessing},
		{reconciler.Stalled("KubeconfigRefused", "Fix the kubeconfig", nil), v1beta2.StateError},
		{reconciler.Retry("ApplyFailed", "Applying failed", nil), v1beta2.StateError},
		{reconciler.Ready("Ready", "Ready", 0), v1beta2.StateReady},
		{reconciler.Stalled("OwnershipConflict", "Remove the object", nil), v1beta2.StateError},
		{reconciler.Warning("Warned", 0), v1beta2.StateWarning},
	}
	for i, step := range sequence {
		reconciler.SetConditions(&conds, 1, step.outcome)
		if got := reconciler.StateOf(conds); got != step.want {
			t.Fatalf("step %d: state = %s, want %s (conditions %+v)", i, got, step.want, conds)
		}
		stalled := conditionTrue(conds, v1beta2.ConditionStalled)
		reconciling := conditionTrue(conds, v1beta2.ConditionReconciling)
		if stalled && reconciling {
			t.Fatalf("step %d: Stalled and Reconciling both True", i)
		}
		if stalled != (step.outcome.Kind == reconciler.KindStalled) {
			t.Fatalf("step %d: Stalled = %v for outcome kind %d", i, stalled, step.outcome.Kind)
		}
	}
}

// TestStalledOnANewGenerationIsFailed records a terminal failure on a spec
// that changed since the last success: kstatus must read Failed (it reads
// InProgress while observedGeneration lags), and a retry must not move
// observedGeneration.
func TestStalledOnANewGenerationIsFailed(t *testing.T) {
	m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "kcp", Generation: 4}}
	m.Status.ObservedGeneration = 3
	s := reconciler.Status{Conditions: &m.Status.Conditions, State: &m.Status.State, ObservedGeneration: &m.Status.ObservedGeneration}
	reconciler.Record(s, m.Generation, reconciler.Retry("ContentFailed", "Fetching failed", nil))
	if m.Status.ObservedGeneration != 3 {
		t.Fatalf("a retry moved observedGeneration to %d", m.Status.ObservedGeneration)
	}
	reconciler.Record(s, m.Generation, reconciler.Stalled("OwnershipConflict", "Remove the object", nil))
	if got := kstatusOf(t, m); got.Status != status.FailedStatus {
		t.Fatalf("kstatus = %s (%s), want Failed", got.Status, got.Message)
	}
}

func TestStateOfWithoutConditionsIsProcessing(t *testing.T) {
	if got := reconciler.StateOf(nil); got != v1beta2.StateProcessing {
		t.Fatalf("StateOf(nil) = %s, want Processing", got)
	}
}

func kstatusOf(t *testing.T, m *v1beta2.Manifest) *status.Result {
	t.Helper()
	m.APIVersion, m.Kind = v1beta2.GroupVersion.String(), "Manifest"
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

package manifest

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestModuleFinalizer(t *testing.T) {
	for _, c := range []struct {
		finalizer, group string
		own              bool
	}{
		{"operator.kyma-project.io/sample", "operator.kyma-project.io", true},
		{"sample.kyma-project.io/finalizer", "operator.kyma-project.io", true}, // the public template-operator's
		{"kyma-project.io/deletion-hook", "operator.kyma-project.io", true},
		{"deep.sample.kyma-project.io/x", "operator.kyma-project.io", true},
		{"example.com/finalizer", "example.com", true}, // a two-label group is its own parent
		{"other.example.com/finalizer", "example.com", true},
		{"backup.velero.io/protect", "operator.kyma-project.io", false}, // another controller's
		{"notkyma-project.io/x", "operator.kyma-project.io", false},     // not a subdomain
		{"foregroundDeletion", "operator.kyma-project.io", false},
		{"orphan", "operator.kyma-project.io", false},
		{"kubernetes.io/pvc-protection", "kubernetes.io", false},
		{"apps.kubernetes.io/x", "kubernetes.io", false},
		{"metrics.k8s.io/x", "metrics.k8s.io", false},
		{v1beta2.ManifestFinalizer, "operator.kyma-project.io", false}, // this operator's, never the module's
		{v1beta2.KymaFinalizer, "operator.kyma-project.io", false},
		{"/x", "operator.kyma-project.io", false},
		{"a.io/x", "", false},
	} {
		if got := moduleFinalizer(c.finalizer, c.group); got != c.own {
			t.Errorf("moduleFinalizer(%q, %q) = %v, want %v", c.finalizer, c.group, got, c.own)
		}
	}
}

func TestOrphanDue(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	after := 30 * time.Minute
	deleted := metav1.NewTime(t0)
	if got := orphanDue(&deleted, t0.Add(-time.Hour), after); !got.Equal(t0.Add(after)) {
		t.Errorf("manager gone before the deletion: due %s after the deletion, got %s", after, got.Sub(t0))
	}
	if got := orphanDue(&deleted, t0.Add(10*time.Minute), after); !got.Equal(t0.Add(40 * time.Minute)) {
		t.Errorf("manager seen gone after the deletion: due %s after that sight, got %s after the deletion", after, got.Sub(t0))
	}
	if got := orphanDue(nil, t0, after); !got.Equal(t0.Add(after)) {
		t.Errorf("no deletion time: due from the sight, got %s", got.Sub(t0))
	}
	if got := waited(&deleted, t0.Add(-time.Hour), t0.Add(90*time.Second)); got != 90*time.Second {
		t.Errorf("waited = %s, want 1m30s", got)
	}
}

func TestOrphanedFinalizersValidate(t *testing.T) {
	for _, ok := range []OrphanedFinalizers{{}, {Policy: OrphansWait}, {Policy: OrphansRemove, After: time.Minute}, {Policy: OrphansRemove}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []OrphanedFinalizers{{Policy: "delete"}, {Policy: "Remove"}, {Policy: OrphansRemove, After: -time.Second}} {
		err := bad.Validate()
		if err == nil {
			t.Errorf("%+v was accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "--orphaned-finalizers") {
			t.Errorf("%+v: the error names no flag: %v", bad, err)
		}
	}
	if (OrphanedFinalizers{}).after() != DefaultOrphanedFinalizersAfter {
		t.Errorf("zero After is the default")
	}
}

func TestOperatorGoneMessage(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	deleted := metav1.NewTime(t0)
	held := []heldResource{{
		resource: v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Group: "operator.kyma-project.io", Version: "v1alpha1", Kind: "Sample"}, Namespace: "kyma-system", Name: "a"},
		meta:     metav1.ObjectMeta{DeletionTimestamp: &deleted},
		own:      []string{"sample.kyma-project.io/finalizer"},
		foreign:  []string{"backup.velero.io/protect"},
	}}
	gone := "its manager Deployment kyma-system/manager does not exist"
	now := t0.Add(5 * time.Minute)

	wait := operatorGoneMessage(held, 1, gone, OrphanedFinalizers{}, t0, now)
	for _, want := range []string{
		"The module's operator is gone (its manager Deployment kyma-system/manager does not exist)",
		"1 of the module's custom resources wait for finalizers that nothing removes",
		"Sample kyma-system/a (finalizers sample.kyma-project.io/finalizer, backup.velero.io/protect; waiting 5m0s)",
		"Restore the manager, or remove the finalizers",
		"--orphaned-finalizers=wait",
		"removed after 30m0s",
	} {
		if !strings.Contains(wait, want) {
			t.Errorf("wait message %q lacks %q", wait, want)
		}
	}
	remove := operatorGoneMessage(held, 1, gone, OrphanedFinalizers{Policy: OrphansRemove, After: time.Hour}, t0, now)
	for _, want := range []string{
		"The module's own finalizers are removed 1h0m0s after a resource's deletion unless the manager is back first (--orphaned-finalizers=remove)",
		"finalizers that are not the module's stay until their owners remove them",
	} {
		if !strings.Contains(remove, want) {
			t.Errorf("remove message %q lacks %q", remove, want)
		}
	}
	many := make([]heldResource, 7)
	for i := range many {
		many[i] = held[0]
	}
	if msg := operatorGoneMessage(many, 120, gone, OrphanedFinalizers{}, t0, now); !strings.Contains(msg, "and 115 more") {
		t.Errorf("a long list is cut at %d, saying how many more: %q", maxNamed, msg)
	}
}

func TestAddNotesKeepsTheLast(t *testing.T) {
	m := &v1beta2.Manifest{}
	addNotes(m, []string{"lost"}) // no operation: nothing to note in
	m.Status.Operations = []v1beta2.Operation{{Type: v1beta2.OperationRemoval}}
	for i := range v1beta2.MaxOperationNotes + 2 {
		addNotes(m, []string{string(rune('a' + i))})
	}
	notes := m.Status.Operations[0].Notes
	if len(notes) != v1beta2.MaxOperationNotes || notes[0] != "c" || notes[len(notes)-1] != "l" {
		t.Errorf("notes = %v, want the last %d", notes, v1beta2.MaxOperationNotes)
	}
	var p pendingNotes
	p.add("uid", "one")
	p.add("uid", "two")
	if got := p.take("uid"); len(got) != 2 || got[1] != "two" {
		t.Errorf("take = %v", got)
	}
	if got := p.take("uid"); got != nil {
		t.Errorf("taken twice: %v", got)
	}
}

package console

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func kymaIn(name string, state v1beta2.State, modules ...v1beta2.State) *v1beta2.Kyma {
	k := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name}}
	k.Status.State = state
	for i, s := range modules {
		k.Status.Modules = append(k.Status.Modules, v1beta2.ModuleStatus{Name: []string{"alpha", "beta"}[i], State: s})
	}
	return k
}

// TestModelKeepsCountsThroughEvents: the counts, the matrix and the order
// the model keeps from events are those of the Kymas it was told of last.
func TestModelKeepsCountsThroughEvents(t *testing.T) {
	now := time.Now()
	type event struct {
		kyma   *v1beta2.Kyma
		delete string
	}
	for _, tc := range []struct {
		name       string
		events     []event
		wantCounts map[v1beta2.State]int
		wantMatrix map[string]map[v1beta2.State]int
		wantNames  []string
	}{
		{
			name:       "added out of order",
			events:     []event{{kyma: kymaIn("b", v1beta2.StateReady, v1beta2.StateReady)}, {kyma: kymaIn("a", v1beta2.StateError, v1beta2.StateError, v1beta2.StateReady)}},
			wantCounts: map[v1beta2.State]int{v1beta2.StateReady: 1, v1beta2.StateError: 1},
			wantMatrix: map[string]map[v1beta2.State]int{"alpha": {v1beta2.StateReady: 1, v1beta2.StateError: 1}, "beta": {v1beta2.StateReady: 1}},
			wantNames:  []string{"a", "b"},
		},
		{
			name:       "changed moves its counts",
			events:     []event{{kyma: kymaIn("a", v1beta2.StateError, v1beta2.StateError)}, {kyma: kymaIn("a", v1beta2.StateReady, v1beta2.StateReady)}},
			wantCounts: map[v1beta2.State]int{v1beta2.StateReady: 1},
			wantMatrix: map[string]map[v1beta2.State]int{"alpha": {v1beta2.StateReady: 1}},
			wantNames:  []string{"a"},
		},
		{
			name:       "deleted leaves nothing, its module neither",
			events:     []event{{kyma: kymaIn("a", v1beta2.StateReady, v1beta2.StateReady, v1beta2.StateReady)}, {kyma: kymaIn("b", v1beta2.StateReady, v1beta2.StateReady)}, {delete: "a"}, {delete: "never-seen"}},
			wantCounts: map[v1beta2.State]int{v1beta2.StateReady: 1},
			wantMatrix: map[string]map[v1beta2.State]int{"alpha": {v1beta2.StateReady: 1}},
			wantNames:  []string{"b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel()
			for _, e := range tc.events {
				if e.kyma != nil {
					m.put(e.kyma)
				} else {
					m.remove(e.delete)
				}
			}
			fl, err := m.fleet(Filter{}, 1, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range fl.Counts {
				if c.N != tc.wantCounts[c.State] {
					t.Errorf("count of %s: got %d, want %d", c.State, c.N, tc.wantCounts[c.State])
				}
			}
			if len(fl.Matrix) != len(tc.wantMatrix) {
				t.Errorf("matrix has %d modules, want %d", len(fl.Matrix), len(tc.wantMatrix))
			}
			for _, row := range fl.Matrix {
				for _, c := range row.Counts {
					if c.N != tc.wantMatrix[row.Module][c.State] {
						t.Errorf("matrix %s × %s: got %d, want %d", row.Module, c.State, c.N, tc.wantMatrix[row.Module][c.State])
					}
				}
			}
			var names []string
			for _, r := range fl.Rows {
				names = append(names, r.Name)
			}
			if !slices.Equal(names, tc.wantNames) {
				t.Errorf("rows %v, want %v", names, tc.wantNames)
			}
		})
	}
}

// TestModelRowAgesAtView: a silent runtime's row says how long it has been
// silent at the time of the view, not at the time of its event.
func TestModelRowAgesAtView(t *testing.T) {
	silentSince := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := kymaIn("silent", v1beta2.StateReady)
	k.Status.Conditions = []metav1.Condition{{Type: v1beta2.ConditionWatcherReporting, Status: metav1.ConditionFalse, Reason: "WatcherSilent", LastTransitionTime: metav1.NewTime(silentSince)}}
	m := newModel()
	m.put(k)
	for _, later := range []time.Duration{time.Minute, time.Hour} {
		r, ok := m.row("silent", silentSince.Add(later))
		if !ok {
			t.Fatal("the model lost the row")
		}
		if r.State != StateUnknown {
			t.Errorf("state %s, want Unknown", r.State)
		}
		if want := "no report from the runtime's watcher for " + later.String(); r.Stale != want {
			t.Errorf("stale %q, want %q", r.Stale, want)
		}
	}
}

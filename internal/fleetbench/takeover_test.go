package fleetbench

import "testing"

// TestModuleObjectComparisonCatchesEveryChange feeds the takeover's check
// the changes it must catch: an object gone, one recreated under the same
// name, a custom resource whose spec changed (its generation), a ConfigMap
// whose data changed; and one whose metadata alone changed, which it must
// not count.
func TestModuleObjectComparisonCatchesEveryChange(t *testing.T) {
	before := map[string]moduleObjectState{
		"ConfigMap a/gone":        {uid: "1", data: "map[x:1]"},
		"ConfigMap a/recreated":   {uid: "2", data: "map[x:1]"},
		"BenchModule a/spec":      {uid: "3", generation: 1},
		"ConfigMap a/data":        {uid: "4", data: "map[x:1]"},
		"BenchModule a/metadata":  {uid: "5", generation: 1},
		"ConfigMap a/metadata-cm": {uid: "6", data: "map[x:1]"},
	}
	after := map[string]moduleObjectState{
		"ConfigMap a/recreated":   {uid: "22", data: "map[x:1]"},
		"BenchModule a/spec":      {uid: "3", generation: 2},
		"ConfigMap a/data":        {uid: "4", data: "map[x:2]"},
		"BenchModule a/metadata":  {uid: "5", generation: 1},
		"ConfigMap a/metadata-cm": {uid: "6", data: "map[x:1]"},
		"ConfigMap a/new":         {uid: "7"},
	}
	recreated, changed := compareModuleObjects(before, after)
	if recreated != 2 || changed != 2 {
		t.Errorf("compareModuleObjects: %d recreated or gone and %d changed, want 2 and 2", recreated, changed)
	}
	if recreated, changed := compareModuleObjects(before, before); recreated != 0 || changed != 0 {
		t.Errorf("compareModuleObjects of a fleet with itself: %d recreated and %d changed, want none", recreated, changed)
	}
}

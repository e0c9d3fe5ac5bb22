package operator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	watcherctrl "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
)

func TestWatchersReport(t *testing.T) {
	moduleLabels := map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: "k1", v1beta2.ModuleNameLabel: "sample",
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	watcher := func(group, resource string, field v1beta2.FieldName, labels map[string]string) v1beta2.Watcher {
		return v1beta2.Watcher{Spec: v1beta2.WatcherSpec{
			ResourceToWatch: v1beta2.WatchableGVR{Group: group, Version: "v1", Resource: resource},
			Field:           field, LabelsToWatch: labels,
		}}
	}
	stalled := watcher("", "configmaps", v1beta2.SpecField, nil)
	stalled.Status.Conditions = []metav1.Condition{{Type: v1beta2.ConditionStalled, Status: metav1.ConditionTrue}}
	defaultWatcher := watcher("operator.kyma-project.io", "kymas", v1beta2.SpecField, nil)
	cmWatcher := watcher("", "configmaps", v1beta2.SpecField, map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue})
	deployWatcher := watcher("apps", "deployments", v1beta2.SpecField, map[string]string{v1beta2.ModuleNameLabel: "sample"})

	tests := []struct {
		name     string
		watchers []v1beta2.Watcher
		syncNS   string
		objects  manifest.ModuleObjects
		want     bool
	}{
		{"the default Watcher alone reports no module object", []v1beta2.Watcher{defaultWatcher}, "",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps}, Labels: moduleLabels}, false},
		{"every resource selected by labels the objects carry", []v1beta2.Watcher{defaultWatcher, cmWatcher, deployWatcher}, "",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps, deployments}, Labels: moduleLabels}, true},
		{"one resource not selected", []v1beta2.Watcher{cmWatcher}, "",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps, deployments}, Labels: moduleLabels}, false},
		{"labels the objects do not carry", []v1beta2.Watcher{watcher("", "configmaps", v1beta2.SpecField, map[string]string{"team": "x"})}, "",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps}, Labels: moduleLabels}, false},
		{"a status Watcher does not report spec drift", []v1beta2.Watcher{watcher("", "configmaps", v1beta2.StatusField, nil)}, "",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps}, Labels: moduleLabels}, false},
		{"a Stalled (invalid) Watcher is not rendered", []v1beta2.Watcher{stalled}, "",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps}, Labels: moduleLabels}, false},
		{"another version of the resource is reported (match policy Equivalent)", []v1beta2.Watcher{cmWatcher}, "",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{{Version: "v2", Resource: "configmaps"}}, Labels: moduleLabels}, true},
		{"the Kyma's own sync namespace: objects in it", []v1beta2.Watcher{cmWatcher}, "team-a",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps}, Namespaces: []string{"team-a"}, Labels: moduleLabels}, true},
		{"the Kyma's own sync namespace: objects outside it", []v1beta2.Watcher{cmWatcher}, "team-a",
			manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps}, Namespaces: []string{"team-a", "other"}, Labels: moduleLabels}, false},
		{"no objects: nothing to report", []v1beta2.Watcher{cmWatcher}, "", manifest.ModuleObjects{Labels: moduleLabels}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := watchersReport(tt.watchers, tt.syncNS, tt.objects); got != tt.want {
				t.Fatalf("watchersReport = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBuiltInModuleRulesReport: with the built-in module rules every module
// object is reported, Watchers or not, within the namespaces the agent's
// webhooks see.
func TestBuiltInModuleRulesReport(t *testing.T) {
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	clusterRoles := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	tests := []struct {
		name    string
		syncNS  string
		objects manifest.ModuleObjects
		want    bool
	}{
		{"any kinds, the operator's sync namespace", "", manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps, clusterRoles, namespaces}, Namespaces: []string{"kyma-system", "other"}}, true},
		{"the Kyma's own sync namespace: objects in it", "team-a", manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps, clusterRoles}, Namespaces: []string{"team-a"}}, true},
		{"the Kyma's own sync namespace: objects outside it", "team-a", manifest.ModuleObjects{Resources: []schema.GroupVersionResource{configMaps}, Namespaces: []string{"other"}}, false},
		{"the Kyma's own sync namespace: a Namespace object", "team-a", manifest.ModuleObjects{Resources: []schema.GroupVersionResource{namespaces}}, false},
		{"no objects: nothing to report", "", manifest.ModuleObjects{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inReportedNamespaces(tt.syncNS, tt.objects); got != tt.want {
				t.Fatalf("inReportedNamespaces = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRuntimeKymaReported: the default Watcher reports the runtime's own
// Kyma; without it, or with it made invalid or narrowed to labels the
// runtime's Kyma does not carry, nothing does.
func TestRuntimeKymaReported(t *testing.T) {
	defaultWatcher := *watcherctrl.DefaultWatcher("kcp-system", 8443)
	stalled := defaultWatcher
	stalled.Status.Conditions = []metav1.Condition{{Type: v1beta2.ConditionStalled, Status: metav1.ConditionTrue}}
	status := defaultWatcher
	status.Spec.Field = v1beta2.StatusField
	narrowed := defaultWatcher
	narrowed.Spec.LabelsToWatch = map[string]string{"team": "x"}
	configMaps := defaultWatcher
	configMaps.Spec.ResourceToWatch = v1beta2.WatchableGVR{Version: "v1", Resource: "configmaps"}

	tests := []struct {
		name     string
		watchers []v1beta2.Watcher
		want     bool
	}{
		{"the default Watcher", []v1beta2.Watcher{defaultWatcher}, true},
		{"no Watcher", nil, false},
		{"a Stalled (invalid) default Watcher", []v1beta2.Watcher{stalled}, false},
		{"a status Watcher", []v1beta2.Watcher{status}, false},
		{"labels the runtime's Kyma does not carry", []v1beta2.Watcher{narrowed}, false},
		{"a Watcher of another resource", []v1beta2.Watcher{configMaps}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runtimeKymaReported(tt.watchers); got != tt.want {
				t.Fatalf("runtimeKymaReported = %v, want %v", got, tt.want)
			}
		})
	}
}

package install

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/hibernation"
	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/maintenance"
)

// helm install with maintenance windows and hibernation schedules: a
// ConfigMap holds them as the files the operator reads (and the operator's
// own parsers accept them), mounted and named by flags, and the pods
// restart when they change.
func TestChartMountsSchedules(t *testing.T) {
	const ns = "scheduled"
	values := map[string]any{
		"maintenanceWindows": []any{map[string]any{
			"name": "eu-weekend", "selector": map[string]any{"matchLabels": map[string]any{"region": "eu"}},
			"days": []any{"Sat", "Sun"}, "start": "02:00", "duration": "4h", "timeZone": "Europe/Berlin",
		}},
		"hibernationSchedules": []any{map[string]any{
			"name": "dev-nights", "selector": map[string]any{"matchLabels": map[string]any{"env": "dev"}},
			"hibernate": "0 20 * * 1-5", "wake": "0 7 * * 1-5",
		}},
	}
	rendered, err := install.RenderChart(chart, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	all := byKey(rendered.Objects())
	cm := &corev1.ConfigMap{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(all["ConfigMap "+ns+"/lifecycle-manager-schedules"].Object, cm); err != nil {
		t.Fatal(err)
	}
	windows, err := maintenance.Parse([]byte(cm.Data["maintenance-windows.yaml"]))
	if err != nil || len(windows.Windows) != 1 || windows.Windows[0].Name != "eu-weekend" {
		t.Errorf("maintenance-windows.yaml %q: %v", cm.Data["maintenance-windows.yaml"], err)
	}
	schedules, err := hibernation.Parse([]byte(cm.Data["hibernation-schedules.yaml"]))
	if err != nil || len(schedules.Schedules) != 1 || schedules.Schedules[0].Name != "dev-nights" {
		t.Errorf("hibernation-schedules.yaml %q: %v", cm.Data["hibernation-schedules.yaml"], err)
	}

	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(all["Deployment "+ns+"/lifecycle-manager"].Object, d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template
	args := pod.Spec.Containers[0].Args
	for _, want := range []string{
		"--maintenance-windows=/etc/lifecycle-manager/maintenance-windows.yaml",
		"--hibernation-schedules=/etc/lifecycle-manager/hibernation-schedules.yaml",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == "lifecycle-manager-schedules"
	}) {
		t.Errorf("no volume of the schedules ConfigMap: %v", pod.Spec.Volumes)
	}
	if pod.Annotations["checksum/schedules"] == "" {
		t.Error("no checksum/schedules annotation: a changed schedule would not restart the operator")
	}

	// Without them, nothing of it is rendered.
	plain, err := install.RenderChart(chart, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byKey(plain.Objects())["ConfigMap "+ns+"/lifecycle-manager-schedules"]; ok {
		t.Error("the schedules ConfigMap is rendered without schedules")
	}
}

package install

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/hibernation"
	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/maintenance"
	"github.com/runtime-fleet/lifecycle-manager/internal/upgradepolicy"
)

// backupRecipient is the example public key of age's documentation.
const backupRecipient = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"

// helm install with maintenance windows, hibernation and backup schedules:
// a ConfigMap holds them as the files the operator reads (and the
// operator's own parsers accept them; the backups' keys are public keys
// only), mounted and named by flags, and the pods restart when they change.
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
		"backupSchedules": []any{map[string]any{
			"name": "all", "schedule": "0 * * * *", "repository": "registry.example/runtime-backups",
			"recipients": []any{backupRecipient},
		}},
		"upgradePolicies": []any{map[string]any{
			"name": "regulated", "selector": map[string]any{"matchLabels": map[string]any{"tier": "regulated"}},
			"upgrade": "Manual", "forceAfter": "168h",
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

	backups, err := backup.Parse([]byte(cm.Data["backup-schedules.yaml"]))
	if err != nil || len(backups.Schedules) != 1 || backups.Schedules[0].InlineRecipients().Len() != 1 {
		t.Errorf("backup-schedules.yaml %q: %v", cm.Data["backup-schedules.yaml"], err)
	}

	policies, err := upgradepolicy.Parse([]byte(cm.Data["upgrade-policies.yaml"]))
	if err != nil || len(policies.Policies) != 1 || policies.Policies[0].Name != "regulated" {
		t.Errorf("upgrade-policies.yaml %q: %v", cm.Data["upgrade-policies.yaml"], err)
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
		"--backup-schedules=/etc/lifecycle-manager/backup-schedules.yaml",
		"--upgrade-policies=/etc/lifecycle-manager/upgrade-policies.yaml",
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

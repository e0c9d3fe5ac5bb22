package install

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// helm install with requireSignatures: one --require-signatures flag per
// entry, naming the key's file in the mounted ConfigMap (and parsed by the
// operator's own parser); without the ConfigMap's name the render fails
// with what to set.
func TestChartRequiresSignatures(t *testing.T) {
	const ns = "signed"
	values := map[string]any{
		"signingKeysConfigMap": "module-signing-keys",
		"requireSignatures": []any{
			map[string]any{"host": "registry.example.com", "key": "team.pub"},
			map[string]any{"host": "registry.example.com:5000", "key": "platform.pub"},
		},
	}
	rendered, err := install.RenderChart(chart, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(byKey(rendered.Objects())["Deployment "+ns+"/lifecycle-manager"].Object, d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	var got []string
	for _, arg := range pod.Containers[0].Args {
		if v, ok := strings.CutPrefix(arg, "--require-signatures="); ok {
			host, file, err := signing.ParseRequirement(v)
			if err != nil {
				t.Fatalf("%s: %v", arg, err)
			}
			got = append(got, host+" "+file)
		}
	}
	want := []string{"registry.example.com /etc/lifecycle-manager-signing/team.pub", "registry.example.com:5000 /etc/lifecycle-manager-signing/platform.pub"}
	if !slices.Equal(got, want) {
		t.Errorf("--require-signatures: got %q, want %q", got, want)
	}
	mounted := slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "signing-keys" && m.MountPath == "/etc/lifecycle-manager-signing" && m.ReadOnly
	})
	volume := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == "signing-keys" && v.ConfigMap != nil && v.ConfigMap.Name == "module-signing-keys"
	})
	if !mounted || !volume {
		t.Errorf("the keys' ConfigMap is not mounted read-only: mounts %+v, volumes %+v", pod.Containers[0].VolumeMounts, pod.Volumes)
	}

	delete(values, "signingKeysConfigMap")
	if _, err := install.RenderChart(chart, ns, values); err == nil || !strings.Contains(err.Error(), "signingKeysConfigMap is required") {
		t.Errorf("without signingKeysConfigMap: got %v, want the render to say it is required", err)
	}
}

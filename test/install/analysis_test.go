package install

import (
	"flag"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/analysis"
	"github.com/runtime-fleet/lifecycle-manager/internal/install"
)

// helm install with the analyses' Prometheus: its URL, and the token
// Secret and CA ConfigMap mounted as the files the flags name, each key
// alone; the operator's own flags take them. Without the values, nothing
// of it is rendered.
func TestChartConfiguresTheAnalysisPrometheus(t *testing.T) {
	const ns = "analysed"
	values := map[string]any{"analysis": map[string]any{"prometheus": map[string]any{
		"url": "https://prometheus.monitoring.svc:9090", "bearerTokenSecret": "prometheus-token", "caConfigMap": "prometheus-ca",
	}}}
	pod := renderedPod(t, ns, values)
	var flags []string
	for _, arg := range pod.Containers[0].Args {
		if strings.HasPrefix(arg, "--analysis-") {
			flags = append(flags, arg)
		}
	}
	fs := flag.NewFlagSet("lifecycle-manager", flag.ContinueOnError)
	opts := analysis.DefaultOptions()
	opts.BindFlags(fs)
	if err := fs.Parse(flags); err != nil {
		t.Fatalf("the operator refuses the chart's flags %v: %v", flags, err)
	}
	want := analysis.Options{
		PrometheusURL:   "https://prometheus.monitoring.svc:9090",
		BearerTokenFile: "/etc/lifecycle-manager-analysis/token/token",
		CAFile:          "/etc/lifecycle-manager-analysis/ca/ca.crt",
		Timeout:         analysis.DefaultOptions().Timeout,
		Concurrency:     analysis.DefaultOptions().Concurrency,
	}
	if opts != want {
		t.Errorf("flags %v: got %+v, want %+v", flags, opts, want)
	}
	for _, v := range []struct{ volume, mount, key string }{
		{"analysis-token", "/etc/lifecycle-manager-analysis/token", "token"},
		{"analysis-ca", "/etc/lifecycle-manager-analysis/ca", "ca.crt"},
	} {
		if !slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == v.volume && m.MountPath == v.mount && m.ReadOnly
		}) {
			t.Errorf("%s is not mounted read-only at %s: %+v", v.volume, v.mount, pod.Containers[0].VolumeMounts)
		}
		if !slices.ContainsFunc(pod.Volumes, func(vol corev1.Volume) bool {
			switch {
			case vol.Name != v.volume:
				return false
			case vol.Secret != nil:
				return vol.Secret.SecretName == "prometheus-token" && len(vol.Secret.Items) == 1 && vol.Secret.Items[0].Key == v.key
			case vol.ConfigMap != nil:
				return vol.ConfigMap.Name == "prometheus-ca" && len(vol.ConfigMap.Items) == 1 && vol.ConfigMap.Items[0].Key == v.key
			}
			return false
		}) {
			t.Errorf("no volume %s of key %s alone: %+v", v.volume, v.key, pod.Volumes)
		}
	}

	plain := renderedPod(t, ns, nil)
	for _, arg := range plain.Containers[0].Args {
		if strings.HasPrefix(arg, "--analysis-") {
			t.Errorf("rendered without analysis values: %s", arg)
		}
	}
	for _, vol := range plain.Volumes {
		if strings.HasPrefix(vol.Name, "analysis-") {
			t.Errorf("rendered without analysis values: volume %s", vol.Name)
		}
	}
}

func renderedPod(t *testing.T, ns string, values map[string]any) corev1.PodSpec {
	t.Helper()
	rendered, err := install.RenderChart(chart, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(byKey(rendered.Objects())["Deployment "+ns+"/lifecycle-manager"].Object, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec
}

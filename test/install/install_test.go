package install

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
)

func key(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := make(map[string]*unstructured.Unstructured, len(objs))
	for _, obj := range objs {
		m[key(obj)] = obj
	}
	return m
}

// The kustomize layout and the chart at its defaults install the same
// objects: config/default only adds the operator's namespace, which Helm
// users create with --create-namespace.
func TestKustomizeAndChartInstallTheSameObjects(t *testing.T) {
	fromKustomize, err := install.RenderKustomize(config)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := install.RenderChart(chart, "kcp-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	kustomized, charted := byKey(fromKustomize), byKey(rendered.Objects())
	for k, want := range charted {
		got, ok := kustomized[k]
		if !ok {
			t.Errorf("the chart installs %s, config/default does not", k)
			continue
		}
		if !equality.Semantic.DeepEqual(got.Object, want.Object) {
			t.Errorf("%s differs between config/default and the chart; run make manifests", k)
		}
	}
	for k := range kustomized {
		if _, ok := charted[k]; !ok && k != "Namespace /kcp-system" {
			t.Errorf("config/default installs %s, the chart does not", k)
		}
	}
	bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rendered.CRDs) != len(bases) {
		t.Errorf("the chart has %d CRDs, want the %d of config/crd/bases", len(rendered.CRDs), len(bases))
	}
}

// kubectl apply -k config/default, with strict server-side validation: the
// namespaces for real (the other objects need them), everything else as a
// dry run, so that the API server's validation and admission judge every
// field.
func TestKustomizeInstallAppliesStrictly(t *testing.T) {
	objs, err := install.RenderKustomize(config)
	if err != nil {
		t.Fatal(err)
	}
	applyStrictly(t, objs)

	deployment := deploymentOf(t, objs, "kcp-system")
	container := deployment.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"--leader-elect", "--namespace=kcp-system", "--watcher-pki-namespace=lifecycle-manager-pki", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(container.Args, arg) {
			t.Errorf("the manager's args %v lack %s", container.Args, arg)
		}
	}
	if container.ReadinessProbe == nil || container.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		container.LivenessProbe == nil || container.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: readiness %+v, liveness %+v; want /readyz and /healthz", container.ReadinessProbe, container.LivenessProbe)
	}
	if container.Resources.Requests.Memory().IsZero() || container.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want memory requests and limits", container.Resources)
	}
	for _, want := range []string{"Service kcp-system/lifecycle-manager-listener", "Service kcp-system/lifecycle-manager-metrics",
		"NetworkPolicy kcp-system/lifecycle-manager", "PodDisruptionBudget kcp-system/lifecycle-manager",
		"ServiceAccount kcp-system/lifecycle-manager", "Role kcp-system/lifecycle-manager", "Role lifecycle-manager-pki/lifecycle-manager",
		"ClusterRole /lifecycle-manager", "ValidatingAdmissionPolicy /lifecycle-manager-content-hosts",
		"CustomResourceDefinition /kymas.operator.kyma-project.io"} {
		if _, ok := byKey(objs)[want]; !ok {
			t.Errorf("config/default lacks %s", want)
		}
	}
}

// The manager's pod passes the restricted Pod Security Standard: a Pod with
// the Deployment's template is admitted, as a dry run, in a namespace that
// enforces it.
func TestManagerPodIsRestricted(t *testing.T) {
	objs, err := install.RenderKustomize(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	template := deploymentOf(t, objs, "kcp-system").Spec.Template
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "manager", Namespace: ns.Name, Labels: template.Labels}, Spec: template.Spec}
	if err := admin.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the manager's pod is refused where the restricted standard is enforced: %v", err)
	}
	// The check can fail: a pod without the securityContext is refused.
	pod.Spec.SecurityContext = nil
	pod.Spec.Containers[0].SecurityContext = nil
	if err := admin.Create(ctx, pod, client.DryRunAll); err == nil {
		t.Fatal("a pod without a securityContext was admitted; the namespace does not enforce the restricted standard")
	}
}

// helm install into other namespaces, with the values users set: nothing
// stays in kcp-system or lifecycle-manager-pki, and the API server takes
// every object.
func TestChartInstallsIntoOtherNamespaces(t *testing.T) {
	const ns, pki = "fleet-ops", "fleet-ops-pki"
	digest := "sha256:" + strings.Repeat("ab", 32)
	rendered, err := install.RenderChart(chart, ns, map[string]any{
		"pkiNamespace": pki,
		"image":        map[string]any{"repository": "registry.example.com/lifecycle-manager", "digest": digest},
		"listener":     map[string]any{"url": "https://listener.fleet.example.com:443", "names": []any{"listener.fleet.example.com"}},
		"extraArgs":    []any{"--kyma-concurrency=16"},
		"env":          []any{map[string]any{"name": "GOMEMLIMIT", "value": "3GiB"}},
		"replicas":     2,
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := rendered.Templates
	var all []*unstructured.Unstructured
	for _, o := range objs {
		all = append(all, o...)
	}
	for _, obj := range all {
		data, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(data); strings.Contains(s, "kcp-system") || strings.Contains(s, "lifecycle-manager-pki") {
			t.Errorf("%s still names a default namespace: %s", key(obj), s)
		}
	}
	ctx := testContext(t)
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	applyStrictly(t, append(rendered.CRDs, all...))

	deployment := deploymentOf(t, all, ns)
	container := deployment.Spec.Template.Spec.Containers[0]
	if want := "registry.example.com/lifecycle-manager@" + digest; container.Image != want {
		t.Errorf("image %s, want %s", container.Image, want)
	}
	for _, arg := range []string{"--namespace=" + ns, "--watcher-pki-namespace=" + pki, "--listener-url=https://listener.fleet.example.com:443",
		"--listener-names=lifecycle-manager-listener." + ns + ".svc,listener.fleet.example.com", "--kyma-concurrency=16"} {
		if !slices.Contains(container.Args, arg) {
			t.Errorf("the manager's args %v lack %s", container.Args, arg)
		}
	}
	// The Pod's own name and namespace (the leader labels its Pod), then
	// the values' env.
	var env []string
	for _, e := range container.Env {
		env = append(env, e.Name)
	}
	if !slices.Equal(env, []string{"POD_NAME", "POD_NAMESPACE", "GOMEMLIMIT"}) {
		t.Errorf("env %v, want POD_NAME, POD_NAMESPACE and GOMEMLIMIT", env)
	}
	if *deployment.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *deployment.Spec.Replicas)
	}
	binding := byKey(all)["ValidatingAdmissionPolicyBinding /lifecycle-manager-content-hosts"]
	if binding == nil {
		t.Fatal("the chart has no content-hosts policy binding")
	}
	if got, _, _ := unstructured.NestedString(binding.Object, "spec", "paramRef", "namespace"); got != ns {
		t.Errorf("the policy binding reads its parameters from %q, want %q", got, ns)
	}
}

// applyStrictly applies objs server-side with strict field validation:
// Namespaces for real, the rest as a dry run. CRDs are created for real
// too, since dry-run objects of a kind cannot be validated without it.
func applyStrictly(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := testContext(t)
	// What the rest needs first, as kubectl apply orders it.
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b *unstructured.Unstructured) int {
		switch {
		case forReal(a) == forReal(b):
			return 0
		case forReal(a):
			return -1
		default:
			return 1
		}
	})
	for _, obj := range ordered {
		opts := []client.PatchOption{client.FieldOwner("install-test"), client.ForceOwnership, client.FieldValidation("Strict")}
		if !forReal(obj) {
			opts = append(opts, client.DryRunAll)
		}
		obj = obj.DeepCopy()
		// client.Client.Apply takes no field validation; the apply patch does.
		if err := admin.Patch(ctx, obj, client.Apply, opts...); err != nil { //nolint:staticcheck // see above
			t.Errorf("applying %s: %v", key(obj), err)
		}
	}
}

func deploymentOf(t *testing.T, objs []*unstructured.Unstructured, ns string) *appsv1.Deployment {
	t.Helper()
	return deploymentNamed(t, objs, ns, "lifecycle-manager")
}

func deploymentNamed(t *testing.T, objs []*unstructured.Unstructured, ns, name string) *appsv1.Deployment {
	t.Helper()
	obj := byKey(objs)[fmt.Sprintf("Deployment %s/%s", ns, name)]
	if obj == nil {
		t.Fatalf("no Deployment %s/%s", ns, name)
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// forReal tells the objects the others need: created for real even by a
// dry run.
func forReal(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "Namespace" || obj.GetKind() == "CustomResourceDefinition"
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

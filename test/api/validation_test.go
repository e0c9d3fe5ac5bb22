package api_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// TestInvalidObjectsAreRefused checks that the API server refuses each invalid
// object with a message naming the field to fix.
func TestInvalidObjectsAreRefused(t *testing.T) {
	ns := newNamespace(t)
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	kyma := func(name string, spec v1beta2.KymaSpec) *v1beta2.Kyma {
		return &v1beta2.Kyma{ObjectMeta: meta(name), Spec: spec}
	}
	template := func(name string, spec v1beta2.ModuleTemplateSpec) *v1beta2.ModuleTemplate {
		return &v1beta2.ModuleTemplate{ObjectMeta: meta(name), Spec: spec}
	}
	releaseMeta := func(name string, spec v1beta2.ModuleReleaseMetaSpec) *v1beta2.ModuleReleaseMeta {
		return &v1beta2.ModuleReleaseMeta{ObjectMeta: meta(name), Spec: spec}
	}
	rollout := func(name string, analysis v1beta2.RolloutAnalysis) *v1beta2.ModuleRollout {
		return &v1beta2.ModuleRollout{ObjectMeta: meta(name), Spec: v1beta2.ModuleRolloutSpec{ModuleName: "shop", MaxInFlight: intstr.FromInt32(1), Analysis: []v1beta2.RolloutAnalysis{analysis}}}
	}
	regular := []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "1.0.0"}}
	validWatcher := v1beta2.WatcherSpec{
		ServiceInfo:     v1beta2.Service{Name: "listener", Namespace: "kcp-system", Port: 8082},
		ResourceToWatch: v1beta2.WatchableGVR{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"},
		Field:           v1beta2.SpecField,
	}

	tests := []struct {
		name string
		obj  client.Object
		want []string // substrings of the error: the field, and what is wrong
	}{
		{
			name: "kyma channel with capitals",
			obj:  kyma("k1", v1beta2.KymaSpec{Channel: "Fast"}),
			want: []string{"spec.channel", "should match '^[a-z]+$'"},
		},
		{
			name: "kyma channel too short",
			obj:  kyma("k2", v1beta2.KymaSpec{Channel: "ab"}),
			want: []string{"spec.channel", "at least 3 chars long"},
		},
		{
			name: "kyma channel too long",
			obj:  kyma("k3", v1beta2.KymaSpec{Channel: "abcdefghijklmnopqrstuvwxyzabcdefg"}),
			want: []string{"spec.channel", "may not be more than 32"},
		},
		{
			name: "module channel with digits",
			obj:  kyma("k4", v1beta2.KymaSpec{Modules: []v1beta2.Module{{Name: "m", Channel: "fast1"}}}),
			want: []string{"spec.modules[0].channel", "should match"},
		},
		{
			name: "duplicate module names",
			obj:  kyma("k5", v1beta2.KymaSpec{Modules: []v1beta2.Module{{Name: "m"}, {Name: "m"}}}),
			want: []string{"spec.modules[1]", "Duplicate value"},
		},
		{
			name: "unknown customResourcePolicy",
			obj:  kyma("k6", v1beta2.KymaSpec{Modules: []v1beta2.Module{{Name: "m", CustomResourcePolicy: "Keep"}}}),
			want: []string{"spec.modules[0].customResourcePolicy", `supported values: "CreateAndDelete", "Ignore"`},
		},
		{
			name: "module without a name",
			obj:  kyma("k7", v1beta2.KymaSpec{Modules: []v1beta2.Module{{Name: ""}}}),
			want: []string{"spec.modules[0].name", "at least 1 chars long"},
		},
		{
			name: "template version not semver",
			obj:  template("t1", v1beta2.ModuleTemplateSpec{ModuleName: "sample", Version: "1.0"}),
			want: []string{"spec.version", "should match"},
		},
		{
			name: "template module name with underscore",
			obj:  template("t2", v1beta2.ModuleTemplateSpec{ModuleName: "bad_name", Version: "1.0.0"}),
			want: []string{"spec.moduleName", "should match"},
		},
		{
			name: "template unknown target",
			obj:  template("t3", v1beta2.ModuleTemplateSpec{ModuleName: "sample", Version: "1.0.0", Target: "moon"}),
			want: []string{"spec.target", `supported values: "runtime", "remote", "control-plane"`},
		},
		{
			name: "template targeting the control plane without RBAC",
			obj:  template("t4", v1beta2.ModuleTemplateSpec{ModuleName: "sample", Version: "1.0.0", Target: v1beta2.TargetControlPlane}),
			want: []string{"spec", "target control-plane needs spec.rbac", "install it into the runtime (target: runtime)"},
		},
		{
			name: "manifest with an operator kubeconfig but no RBAC",
			obj:  &v1beta2.Manifest{ObjectMeta: meta("m3"), Spec: v1beta2.ManifestSpec{Remote: true, ModuleName: "sample", OperatorKubeconfig: true}},
			want: []string{"spec", "operatorKubeconfig needs rbac"},
		},
		{
			name: "template runtime value key that is not a dotted path",
			obj:  template("t5", v1beta2.ModuleTemplateSpec{ModuleName: "sample", Version: "1.0.0", RuntimeValues: []string{"greeting", "a..b"}}),
			want: []string{"spec.runtimeValues[1]", "should match"},
		},
		{
			name: "template runtime value key twice",
			obj:  template("t6", v1beta2.ModuleTemplateSpec{ModuleName: "sample", Version: "1.0.0", RuntimeValues: []string{"greeting", "greeting"}}),
			want: []string{"spec.runtimeValues[1]", "Duplicate value"},
		},
		{
			name: "manifest for the control plane",
			obj:  &v1beta2.Manifest{ObjectMeta: meta("m2"), Spec: v1beta2.ManifestSpec{Remote: false, ModuleName: "sample"}},
			want: []string{"spec.remote", "remote: false (install into the control plane) is not supported yet", "set remote: true"},
		},
		{
			name: "release meta with channels and mandatory",
			obj: releaseMeta("r1", v1beta2.ModuleReleaseMetaSpec{
				ModuleName: "sample", Channels: regular, Mandatory: &v1beta2.Mandatory{Version: "1.0.0"},
			}),
			want: []string{"spec", "exactly one of spec.channels and spec.mandatory must be set"},
		},
		{
			name: "release meta with neither channels nor mandatory",
			obj:  releaseMeta("r2", v1beta2.ModuleReleaseMetaSpec{ModuleName: "sample"}),
			want: []string{"spec", "exactly one of spec.channels and spec.mandatory must be set"},
		},
		{
			name: "release meta with a channel twice",
			obj: releaseMeta("r3", v1beta2.ModuleReleaseMetaSpec{ModuleName: "sample", Channels: []v1beta2.ChannelVersionAssignment{
				{Channel: "regular", Version: "1.0.0"}, {Channel: "regular", Version: "2.0.0"},
			}}),
			want: []string{"spec.channels[1]", "Duplicate value"},
		},
		{
			name: "release meta channel version not semver",
			obj: releaseMeta("r4", v1beta2.ModuleReleaseMetaSpec{ModuleName: "sample", Channels: []v1beta2.ChannelVersionAssignment{
				{Channel: "regular", Version: "latest"},
			}}),
			want: []string{"spec.channels[0].version", "should match"},
		},
		{
			name: "release meta mandatory version not semver",
			obj: releaseMeta("r5", v1beta2.ModuleReleaseMetaSpec{
				ModuleName: "sample", Mandatory: &v1beta2.Mandatory{Version: "v1"},
			}),
			want: []string{"spec.mandatory.version", "should match"},
		},
		{
			name: "release meta channel name invalid",
			obj: releaseMeta("r6", v1beta2.ModuleReleaseMetaSpec{ModuleName: "sample", Channels: []v1beta2.ChannelVersionAssignment{
				{Channel: "x", Version: "1.0.0"},
			}}),
			want: []string{"spec.channels[0].channel", "at least 3 chars long"},
		},
		{
			name: "release meta OCM component name without a domain",
			obj:  releaseMeta("r7", v1beta2.ModuleReleaseMetaSpec{ModuleName: "sample", OcmComponentName: "sample", Channels: regular}),
			want: []string{"spec.ocmComponentName", "should match"},
		},
		{
			name: "release meta OCM component name with capitals",
			obj:  releaseMeta("r8", v1beta2.ModuleReleaseMetaSpec{ModuleName: "sample", OcmComponentName: "Kyma-Project.io/module/Sample", Channels: regular}),
			want: []string{"spec.ocmComponentName", "should match"},
		},
		{
			name: "manifest localized image too long",
			obj: &v1beta2.Manifest{ObjectMeta: meta("m2"), Spec: v1beta2.ManifestSpec{
				Remote: true, LocalizedImages: []string{"registry.example/" + strings.Repeat("a", 600)},
			}},
			want: []string{"spec.localizedImages[0]", "may not be more than 512"},
		},
		{
			name: "manifest unknown customResourcePolicy",
			obj: &v1beta2.Manifest{ObjectMeta: meta("m1"), Spec: v1beta2.ManifestSpec{
				Remote: true, CustomResourcePolicy: "Sometimes",
			}},
			want: []string{"spec.customResourcePolicy", "supported values"},
		},
		{
			name: "watcher unknown field",
			obj: func() client.Object {
				spec := validWatcher
				spec.Field = "metadata"
				return &v1beta2.Watcher{ObjectMeta: meta("w1"), Spec: spec}
			}(),
			want: []string{"spec.field", `supported values: "spec", "status"`},
		},
		{
			name: "watcher port out of range",
			obj: func() client.Object {
				spec := validWatcher
				spec.ServiceInfo.Port = 70000
				return &v1beta2.Watcher{ObjectMeta: meta("w2"), Spec: spec}
			}(),
			want: []string{"spec.serviceInfo.port", "less than or equal to 65535"},
		},
		{
			name: "rollout analysis with both prometheus and condition",
			obj: rollout("r1", v1beta2.RolloutAnalysis{Name: "both",
				Prometheus: &v1beta2.PrometheusAnalysis{Query: "up", Max: "1"}, Condition: &v1beta2.ConditionAnalysis{Type: "Ready"}}),
			want: []string{"spec.analysis[0]", "exactly one of prometheus or condition"},
		},
		{
			name: "rollout prometheus analysis without a bound",
			obj:  rollout("r2", v1beta2.RolloutAnalysis{Name: "unbounded", Prometheus: &v1beta2.PrometheusAnalysis{Query: "up"}}),
			want: []string{"spec.analysis[0].prometheus", "needs max, min or both"},
		},
		{
			name: "rollout prometheus bound that is not a number",
			obj:  rollout("r3", v1beta2.RolloutAnalysis{Name: "nan", Prometheus: &v1beta2.PrometheusAnalysis{Query: "up", Max: "NaN"}}),
			want: []string{"spec.analysis[0].prometheus.max", "should match"},
		},
		{
			name: "template rollbackTo too long",
			obj: template("t-rollback", v1beta2.ModuleTemplateSpec{ModuleName: "m", Version: "2.0.0",
				RollbackTo: []string{strings.Repeat("1", 129)}}),
			want: []string{"spec.rollbackTo[0]", "may not be more than 128"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8sClient.Create(context.Background(), tt.obj)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, want := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

// TestRolloutKeepsItsModuleAndChannel: a ModuleRollout cannot move to
// another module or channel, nor gain or lose one (a mandatory module's
// rollout has none).
func TestRolloutKeepsItsModuleAndChannel(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for _, change := range []struct{ from, to string }{{"", "regular"}, {"regular", ""}, {"regular", "fast"}} {
		ro := &v1beta2.ModuleRollout{ObjectMeta: metav1.ObjectMeta{GenerateName: "ro-", Namespace: ns}, Spec: v1beta2.ModuleRolloutSpec{ModuleName: "shop", Channel: change.from, MaxInFlight: intstr.FromInt32(1)}}
		g.Expect(k8sClient.Create(ctx, ro)).To(Succeed())
		ro.Spec.Channel = change.to
		err := k8sClient.Update(ctx, ro)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%q → %q: want Invalid, got %v", change.from, change.to, err)
		g.Expect(err.Error()).To(ContainSubstring("moduleName and channel cannot change"))
	}
}

// TestRuntimeTargetsOfTheKymaAPIStillApply checks that refusing the control
// plane leaves every runtime target of the Kyma API valid: a Manifest with
// remote: true, a Manifest without remote, a template with the older target:
// remote, and a template without target, which defaults to the runtime. A
// control-plane template that declares RBAC is accepted too.
func TestRuntimeTargetsOfTheKymaAPIStillApply(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	strict := client.WithFieldValidation(k8sClient, metav1.FieldValidationStrict)

	objects := []string{
		`{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"Manifest","metadata":{"name":"remote-true"},
		  "spec":{"remote":true,"install":{"name":"raw-manifest","source":{"type":"oci-ref"}}}}`,
		`{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"Manifest","metadata":{"name":"remote-absent"},"spec":{"version":"1.0.0"}}`,
		`{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"ModuleTemplate","metadata":{"name":"older-klm"},
		  "spec":{"channel":"regular","target":"remote","data":{"apiVersion":"v1","kind":"Sample"},"descriptor":{"component":{"name":"x"}}}}`,
		`{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"ModuleTemplate","metadata":{"name":"no-target"},
		  "spec":{"moduleName":"sample","version":"1.0.0"}}`,
		`{"apiVersion":"operator.kyma-project.io/v1beta2","kind":"ModuleTemplate","metadata":{"name":"control-plane-with-rbac"},
		  "spec":{"moduleName":"sample","version":"1.0.0","target":"control-plane",
		          "rbac":{"namespacedRules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","watch"]}]}}}`,
	}
	for _, raw := range objects {
		obj := &unstructured.Unstructured{}
		g.Expect(obj.UnmarshalJSON([]byte(raw))).To(Succeed())
		obj.SetNamespace(ns)
		g.Expect(strict.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	got := &v1beta2.ModuleTemplate{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "no-target"}, got)).To(Succeed())
	g.Expect(got.Spec.Target).To(Equal(v1beta2.TargetRuntime))
	g.Expect(got.Spec.RuntimeValues).To(BeEmpty(), "absent runtimeValues: the runtime's Kyma may set no values")
}

package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

func testWatcher(name string, field v1beta2.FieldName, watchLabels map[string]string) v1beta2.Watcher {
	w := *DefaultWatcher("kcp-system", 8443)
	w.Name = name
	w.Spec.Field = field
	w.Spec.LabelsToWatch = watchLabels
	return w
}

func kinds(objects []client.Object) []string {
	var out []string
	for _, o := range objects {
		switch o.(type) {
		case *corev1.Namespace:
			out = append(out, "Namespace")
		case *corev1.Secret:
			out = append(out, "Secret/"+o.GetName())
		case *corev1.ServiceAccount:
			out = append(out, "ServiceAccount")
		case *rbacv1.Role:
			out = append(out, "Role")
		case *rbacv1.RoleBinding:
			out = append(out, "RoleBinding")
		case *appsv1.Deployment:
			out = append(out, "Deployment")
		case *corev1.Service:
			out = append(out, "Service")
		}
	}
	return out
}

func TestRender(t *testing.T) {
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "k1"}}
	shared := kyma.DeepCopy()
	shared.Spec.SyncNamespace = "load-7"
	creds := map[string][]byte{pki.CAKey: []byte("kcp-ca"), pki.ServingCACertKey: []byte("ca"), pki.ClientCertKey: []byte("cc"), pki.ClientKeyKey: []byte("ck"), pki.ServingCertKey: []byte("sc"), pki.ServingKeyKey: []byte("sk")}
	spec := testWatcher("kymas", v1beta2.SpecField, map[string]string{v1beta2.WatchedByLabel: "kyma"})
	status := testWatcher("kyma-status", v1beta2.StatusField, nil)
	invalid := testWatcher("invalid", v1beta2.SpecField, map[string]string{"no spaces allowed": "x"})
	inCluster := []string{"Namespace", "Secret/runtime-watcher-client", "Secret/runtime-watcher-serving", "ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"}
	local := inCluster[:6]

	tests := []struct {
		name       string
		in         renderInput
		objects    []string
		hooks      []string
		check      func(g Gomega, hooks map[string]admissionregistrationv1.ValidatingWebhook)
		noWebhooks bool
	}{
		{
			name:    "in cluster",
			in:      renderInput{Kyma: kyma, Namespace: "kyma-system", Credentials: creds, Watchers: []v1beta2.Watcher{spec, status}, ListenerURL: "https://l:8443", Image: "img"},
			objects: inCluster,
			hooks:   []string{"kyma-status.kcp-system.watcher.operator.kyma-project.io", "kymas.kcp-system.watcher.operator.kyma-project.io"},
			check: func(g Gomega, hooks map[string]admissionregistrationv1.ValidatingWebhook) {
				h := hooks["kymas.kcp-system.watcher.operator.kyma-project.io"]
				g.Expect(h.ClientConfig.URL).To(BeNil())
				g.Expect(*h.ClientConfig.Service.Path).To(Equal("/validate/kymas/spec"))
				g.Expect(h.ClientConfig.CABundle).To(Equal([]byte("ca")))
				g.Expect(h.Rules[0].Resources).To(Equal([]string{"kymas"}))
				g.Expect(h.ObjectSelector.MatchLabels).To(Equal(spec.Spec.LabelsToWatch))
				g.Expect(h.NamespaceSelector).To(BeNil())
				g.Expect(*h.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
				s := hooks["kyma-status.kcp-system.watcher.operator.kyma-project.io"]
				g.Expect(s.Rules[0].Resources).To(Equal([]string{"kymas/status"}))
				g.Expect(s.Rules[0].Operations).To(Equal([]admissionregistrationv1.OperationType{admissionregistrationv1.Update}))
			},
		},
		{
			name:    "local agent",
			in:      renderInput{Kyma: kyma, Namespace: "kyma-system", Credentials: creds, Watchers: []v1beta2.Watcher{spec}, LocalURL: "https://127.0.0.1:9443/"},
			objects: local,
			hooks:   []string{"kymas.kcp-system.watcher.operator.kyma-project.io"},
			check: func(g Gomega, hooks map[string]admissionregistrationv1.ValidatingWebhook) {
				h := hooks["kymas.kcp-system.watcher.operator.kyma-project.io"]
				g.Expect(*h.ClientConfig.URL).To(Equal("https://127.0.0.1:9443/validate/kymas/spec"))
				g.Expect(h.ClientConfig.Service).To(BeNil())
			},
		},
		{
			name:    "shared runtime API server",
			in:      renderInput{Kyma: shared, Namespace: "load-7", Credentials: creds, Watchers: []v1beta2.Watcher{spec}},
			objects: inCluster,
			hooks:   []string{"kymas.kcp-system.watcher.operator.kyma-project.io"},
			check: func(g Gomega, hooks map[string]admissionregistrationv1.ValidatingWebhook) {
				sel := hooks["kymas.kcp-system.watcher.operator.kyma-project.io"].NamespaceSelector
				g.Expect(sel.MatchExpressions).To(ConsistOf(metav1.LabelSelectorRequirement{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"load-7"}}))
			},
		},
		{
			name: "module resources",
			in: renderInput{Kyma: kyma, Namespace: "kyma-system", Credentials: creds, LocalURL: "https://127.0.0.1:9443",
				ModuleResources: true},
			objects: local,
			hooks:   []string{"module-resources.builtin.watcher.operator.kyma-project.io", "module-status.builtin.watcher.operator.kyma-project.io"},
			check: func(g Gomega, hooks map[string]admissionregistrationv1.ValidatingWebhook) {
				// The Kyma's own module resources only: all three ownership
				// labels, whatever their kind.
				for _, h := range hooks {
					g.Expect(h.ObjectSelector.MatchLabels).To(Equal(map[string]string{
						v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: kyma.Name,
					}))
					g.Expect(h.ObjectSelector.MatchExpressions).To(ConsistOf(metav1.LabelSelectorRequirement{
						Key: v1beta2.ModuleNameLabel, Operator: metav1.LabelSelectorOpExists,
					}))
					g.Expect(h.Rules[0].APIGroups).To(Equal([]string{"*"}))
					g.Expect(*h.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
				}
				spec := hooks["module-resources.builtin.watcher.operator.kyma-project.io"]
				g.Expect(spec.Rules[0].Resources).To(Equal([]string{"*"}))
				g.Expect(spec.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Update, admissionregistrationv1.Delete))
				g.Expect(*spec.ClientConfig.URL).To(Equal("https://127.0.0.1:9443/validate/module-resources/spec"))
				status := hooks["module-status.builtin.watcher.operator.kyma-project.io"]
				g.Expect(status.Rules[0].Resources).To(Equal([]string{"*/status"}))
				g.Expect(status.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Update))
				g.Expect(*status.ClientConfig.URL).To(Equal("https://127.0.0.1:9443/validate/module-resources/status"))
			},
		},
		{
			name:       "invalid Watchers only",
			in:         renderInput{Kyma: kyma, Namespace: "kyma-system", Credentials: creds, Watchers: []v1beta2.Watcher{invalid}},
			objects:    inCluster,
			noWebhooks: true,
		},
		{
			name:       "no Watchers",
			in:         renderInput{Kyma: kyma, Namespace: "kyma-system", Credentials: creds},
			objects:    inCluster,
			noWebhooks: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objects, webhook := render(tt.in)
			g.Expect(kinds(objects)).To(Equal(tt.objects))
			if tt.noWebhooks {
				g.Expect(webhook).To(BeNil())
				return
			}
			g.Expect(webhook.Name).To(Equal("runtime-watcher-" + tt.in.Namespace))
			hooks := map[string]admissionregistrationv1.ValidatingWebhook{}
			var names []string
			for _, h := range webhook.Webhooks {
				hooks[h.Name] = h
				names = append(names, h.Name)
			}
			g.Expect(names).To(Equal(tt.hooks))
			if tt.check != nil {
				tt.check(g, hooks)
			}
			for _, o := range objects[1:] {
				g.Expect(o.GetLabels()).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue), "%T is not pruned by ownership", o)
			}
		})
	}
}

func TestAgentRoleReadsOnlyItsSecrets(t *testing.T) {
	objects, _ := render(renderInput{Kyma: &v1beta2.Kyma{}, Namespace: "kyma-system"})
	for _, o := range objects {
		if role, ok := o.(*rbacv1.Role); ok {
			NewWithT(t).Expect(role.Rules).To(ConsistOf(rbacv1.PolicyRule{
				APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"},
				ResourceNames: []string{"runtime-watcher-client", "runtime-watcher-serving"},
			}))
			return
		}
	}
	t.Fatal("no Role rendered")
}

func TestPaused(t *testing.T) {
	group, err := labels.Parse("region=eu-1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		labels   map[string]string
		selector labels.Selector
		want     bool
	}{
		{name: "no label", want: false},
		{name: "paused label", labels: map[string]string{v1beta2.WatcherPausedLabel: "true"}, want: true},
		{name: "paused label false", labels: map[string]string{v1beta2.WatcherPausedLabel: "false"}, want: false},
		{name: "paused group", labels: map[string]string{"region": "eu-1"}, selector: group, want: true},
		{name: "other group", labels: map[string]string{"region": "us-1"}, selector: group, want: false},
		{name: "empty selector pauses nothing", labels: map[string]string{"region": "eu-1"}, selector: labels.Everything(), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}
			if got := Paused(kyma, tt.selector); got != tt.want {
				t.Fatalf("Paused() = %v, want %v", got, tt.want)
			}
		})
	}
}

// A runtime is expected to report unless work on it is paused by the
// operator's policy (skip-reconciliation label or a paused label group) or
// its reporting is paused; only such runtimes count as silent.
func TestReporting(t *testing.T) {
	group, err := labels.Parse("region=eu-1")
	if err != nil {
		t.Fatal(err)
	}
	reportingGroup, err := labels.Parse("tier=canary")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{name: "nothing paused", labels: map[string]string{"region": "us-1"}, want: true},
		{name: "skip-reconciliation", labels: map[string]string{v1beta2.SkipReconciliationLabel: "true"}, want: false},
		{name: "skip-reconciliation in capitals", labels: map[string]string{v1beta2.SkipReconciliationLabel: "TRUE"}, want: false},
		{name: "the operator's pause group", labels: map[string]string{"region": "eu-1"}, want: false},
		{name: "reporting paused by label", labels: map[string]string{v1beta2.WatcherPausedLabel: "true"}, want: false},
		{name: "reporting paused by group", labels: map[string]string{"tier": "canary"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}
			if got := Reporting(kyma, pause.Policy{Group: group}, reportingGroup); got != tt.want {
				t.Fatalf("Reporting() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCredentialsSecretNameFitsASecret(t *testing.T) {
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'k'
	}
	a, b := CredentialsSecretName(string(long)), CredentialsSecretName(string(long[:299]))
	if len(a) > 253 || len(b) > 253 || a == b {
		t.Fatalf("names %d and %d characters, equal %v", len(a), len(b), a == b)
	}
	if CredentialsSecretName("k1") != "watcher-k1" {
		t.Fatal("a short name is not kept readable")
	}
}

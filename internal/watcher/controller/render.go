package controller

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// AgentServiceAccount is the ServiceAccount the agent runs as, in the
// runtime's sync namespace: an identity of the operator's that no module's
// Pod may run as (internal/apply Limits).
const AgentServiceAccount = agentName

// Names of the agent's resources in a runtime.
const (
	agentName = "runtime-watcher"
	// webhookPort is the Service port the runtime's API server calls.
	webhookPort = 443
	// agentWebhookPort and agentMetricsPort are the container's ports.
	agentWebhookPort = 9443
	agentMetricsPort = 8080
	// webhookTimeoutSeconds is short because the agent answers at once; a
	// slow agent must not slow down the runtime's API.
	webhookTimeoutSeconds = 2
)

// webhookConfigName names the runtime's webhook configuration. It is
// cluster-scoped, so it carries the namespace: load tests let several Kymas
// share one runtime API server, each in a namespace of its own (SPEC R19).
func webhookConfigName(namespace string) string {
	return agentName + "-" + namespace
}

// servingNames are the names the runtime's API server may reach the agent
// by: its Service, and loopback for an agent run next to the API server
// (tests, dev environment).
func servingNames(namespace string) ([]string, []net.IP) {
	svc := agentName + "." + namespace + ".svc"
	return []string{svc, svc + ".cluster.local", "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
}

// renderInput is everything the agent's resources depend on.
type renderInput struct {
	Kyma      *v1beta2.Kyma
	Namespace string
	// Credentials are the runtime's certificates (pki keys).
	Credentials map[string][]byte
	Watchers    []v1beta2.Watcher
	// LocalURL, when set, is the base URL of an agent running outside the
	// runtime; no Deployment or Service is rendered then.
	LocalURL    string
	ListenerURL string
	Image       string
	// ModuleResources adds the built-in rules that report the Kyma's module
	// resources (moduleHooks).
	ModuleResources bool
}

// render returns the agent's objects for a runtime, Namespace first, and the
// webhook configuration last (nil when no Watcher is valid), so that the
// runtime's API server only calls the agent once it can exist.
func render(in renderInput) (objects []client.Object, webhook *admissionregistrationv1.ValidatingWebhookConfiguration) {
	ns := in.Namespace
	labels := map[string]string{
		v1beta2.ManagedByLabel:      v1beta2.ManagedByValue,
		v1beta2.KymaNameLabel:       in.Kyma.Name,
		"app.kubernetes.io/name":    agentName,
		"app.kubernetes.io/part-of": "lifecycle-manager",
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	creds := in.Credentials
	objects = []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: meta(agent.DefaultClientSecret), Type: corev1.SecretTypeTLS, Data: map[string][]byte{
			corev1.TLSCertKey: creds[pki.ClientCertKey], corev1.TLSPrivateKeyKey: creds[pki.ClientKeyKey], pki.CAKey: creds[pki.CAKey],
		}},
		&corev1.Secret{ObjectMeta: meta(agent.DefaultServingSecret), Type: corev1.SecretTypeTLS, Data: map[string][]byte{
			corev1.TLSCertKey: creds[pki.ServingCertKey], corev1.TLSPrivateKeyKey: creds[pki.ServingKeyKey], pki.CAKey: creds[pki.ServingCACertKey],
		}},
		&corev1.ServiceAccount{ObjectMeta: meta(agentName)},
		// The agent reads its two Secrets and nothing else.
		&rbacv1.Role{ObjectMeta: meta(agentName), Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"},
			ResourceNames: []string{agent.DefaultClientSecret, agent.DefaultServingSecret},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: meta(agentName),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: agentName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: agentName, Namespace: ns}},
		},
	}
	if in.LocalURL == "" {
		objects = append(objects, deployment(in, meta(agentName)), service(meta(agentName)))
	}

	var hooks []admissionregistrationv1.ValidatingWebhook
	for i := range in.Watchers {
		w := &in.Watchers[i]
		if len(specProblems(w)) > 0 || !w.DeletionTimestamp.IsZero() {
			continue
		}
		hooks = append(hooks, validatingWebhook(w, in, creds[pki.ServingCACertKey]))
	}
	if in.ModuleResources {
		hooks = append(hooks, moduleHooks(in, creds[pki.ServingCACertKey])...)
	}
	if len(hooks) == 0 {
		return objects, nil
	}
	slices.SortFunc(hooks, func(a, b admissionregistrationv1.ValidatingWebhook) int { return strings.Compare(a.Name, b.Name) })
	webhook = &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName(ns), Labels: labels},
		Webhooks:   hooks,
	}
	return objects, webhook
}

func validatingWebhook(w *v1beta2.Watcher, in renderInput, caBundle []byte) admissionregistrationv1.ValidatingWebhook {
	clientConfig := agentClientConfig(in, agent.ValidatePathFor(w.Name, w.Spec.Field), caBundle)
	res := w.Spec.ResourceToWatch.Resource
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}
	if w.Spec.Field == v1beta2.StatusField {
		// Status is written through its subresource, and only updated.
		res += "/status"
		ops = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
	}
	rule := admissionregistrationv1.Rule{
		APIGroups:   []string{w.Spec.ResourceToWatch.Group},
		APIVersions: []string{w.Spec.ResourceToWatch.Version},
		Resources:   []string{res},
	}
	return agentWebhook(in, webhookName(w), clientConfig, rule, ops, &metav1.LabelSelector{MatchLabels: w.Spec.LabelsToWatch})
}

// agentWebhook is one webhook calling the agent: never blocking the
// runtime's API, no reports for dry runs, the object selector given.
func agentWebhook(in renderInput, name string, clientConfig admissionregistrationv1.WebhookClientConfig, rule admissionregistrationv1.Rule,
	ops []admissionregistrationv1.OperationType, objects *metav1.LabelSelector,
) admissionregistrationv1.ValidatingWebhook {
	rule.Scope = ptr.To(admissionregistrationv1.AllScopes)
	hook := admissionregistrationv1.ValidatingWebhook{
		Name:           name,
		ClientConfig:   clientConfig,
		Rules:          []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: rule}},
		ObjectSelector: objects,
		// Never block the runtime's API because the agent is away.
		FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
		// The agent reports, which is a side effect, but not for dry runs.
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
		TimeoutSeconds:          ptr.To[int32](webhookTimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
	}
	if in.Kyma.Spec.SyncNamespace != "" {
		// Several Kymas share this runtime's API server (SPEC R19): each
		// agent watches its own namespace only, or every agent would report
		// every Kyma's changes.
		hook.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{in.Namespace},
		}}}
	}
	return hook
}

// agentClientConfig reaches the agent at path: by URL when it runs outside
// the runtime, through its Service otherwise.
func agentClientConfig(in renderInput, path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	clientConfig := admissionregistrationv1.WebhookClientConfig{CABundle: caBundle}
	if in.LocalURL != "" {
		clientConfig.URL = ptr.To(strings.TrimSuffix(in.LocalURL, "/") + path)
	} else {
		clientConfig.Service = &admissionregistrationv1.ServiceReference{
			Namespace: in.Namespace, Name: agentName, Path: &path, Port: ptr.To[int32](webhookPort),
		}
	}
	return clientConfig
}

// ModuleResourcesWatcher is the watcher name of the built-in rules in
// reports and agent paths.
const ModuleResourcesWatcher = "module-resources"

// Names of the built-in module-resource webhooks; "builtin" stands where a
// Watcher's namespace would, so no Watcher's webhook can take the name.
const (
	moduleSpecHook   = ModuleResourcesWatcher + ".builtin.watcher.operator.kyma-project.io"
	moduleStatusHook = "module-status.builtin.watcher.operator.kyma-project.io"
)

// moduleHooks are the built-in rules that make a module's resources
// event-driven: any object the operator installed for one of this Kyma's
// modules (all three ownership labels) is reported when its spec changes or
// it is deleted (drift) and when its status changes (the manager becoming
// Available, the module's CR reporting Ready). The listener requeues the
// module's Manifest at once, so readiness and drift do not wait for a
// periodic reconcile. Creates are left out: the operator itself creates
// them, and learns nothing from hearing of it.
func moduleHooks(in renderInput, caBundle []byte) []admissionregistrationv1.ValidatingWebhook {
	objects := &metav1.LabelSelector{
		MatchLabels: map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: in.Kyma.Name},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: v1beta2.ModuleNameLabel, Operator: metav1.LabelSelectorOpExists,
		}},
	}
	all := admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}
	status := all
	status.Resources = []string{"*/status"}
	return []admissionregistrationv1.ValidatingWebhook{
		agentWebhook(in, moduleSpecHook, agentClientConfig(in, agent.ValidatePathFor(ModuleResourcesWatcher, v1beta2.SpecField), caBundle), all,
			[]admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Delete}, objects),
		agentWebhook(in, moduleStatusHook, agentClientConfig(in, agent.ValidatePathFor(ModuleResourcesWatcher, v1beta2.StatusField), caBundle), status,
			[]admissionregistrationv1.OperationType{admissionregistrationv1.Update}, objects),
	}
}

// webhookName is the Watcher's webhook's name; it must be a fully qualified
// name, unique in the configuration.
func webhookName(w *v1beta2.Watcher) string {
	return w.Name + "." + w.Namespace + ".watcher.operator.kyma-project.io"
}

func deployment(in renderInput, meta metav1.ObjectMeta) *appsv1.Deployment {
	selector := map[string]string{"app.kubernetes.io/name": agentName, v1beta2.KymaNameLabel: in.Kyma.Name}
	podLabels := map[string]string{}
	for k, v := range meta.Labels {
		podLabels[k] = v
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(agentMetricsPort)}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: agentName,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  agentName,
						Image: in.Image,
						Args: []string{
							"--listener-url=" + in.ListenerURL,
							"--kyma-name=" + in.Kyma.Name,
							"--namespace=" + in.Namespace,
							fmt.Sprintf("--listen-address=:%d", agentWebhookPort),
							fmt.Sprintf("--metrics-address=:%d", agentMetricsPort),
						},
						Ports: []corev1.ContainerPort{
							{Name: "webhook", ContainerPort: agentWebhookPort},
							{Name: "metrics", ContainerPort: agentMetricsPort},
						},
						ReadinessProbe: probe("/readyz"),
						LivenessProbe:  probe("/healthz"),
						// A small, bounded share of a node (SPEC R9).
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

func service(meta metav1.ObjectMeta) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": agentName, v1beta2.KymaNameLabel: meta.Labels[v1beta2.KymaNameLabel]},
			Ports:    []corev1.ServicePort{{Name: "webhook", Port: webhookPort, TargetPort: intstr.FromInt32(agentWebhookPort)}},
		},
	}
}

// specProblems lists what the CRD schema cannot check but a runtime's API
// server would refuse in the webhook configuration, each with the field and
// the fix, in a stable order (label keys sorted), so that the message built
// from them does not change from one reconcile to the next. None means valid.
func specProblems(w *v1beta2.Watcher) []string {
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(w.Spec.LabelsToWatch)) {
		v := w.Spec.LabelsToWatch[k]
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("labelsToWatch key %q is not a valid label key (%s)", k, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("labelsToWatch value %q of key %q is not a valid label value (%s)", v, k, strings.Join(msgs, "; ")))
		}
	}
	if r := w.Spec.ResourceToWatch.Resource; r == "" || strings.Contains(r, "/") {
		problems = append(problems, fmt.Sprintf("resourceToWatch.resource %q must name a resource without a subresource (set field: status to watch the status)", r))
	}
	switch w.Spec.Field {
	case v1beta2.SpecField, v1beta2.StatusField:
	default:
		problems = append(problems, fmt.Sprintf("field %q must be spec or status", w.Spec.Field))
	}
	if msgs := validation.IsDNS1123Subdomain(webhookName(w)); len(msgs) > 0 {
		problems = append(problems, fmt.Sprintf("the Watcher's name and namespace make the webhook name %q, which is not a valid DNS subdomain (%s); choose a shorter name",
			webhookName(w), strings.Join(msgs, "; ")))
	}
	return problems
}

// toUnstructured converts typed objects for server-side apply, with their
// group, version and kind set.
func toUnstructured(scheme *k8sruntime.Scheme, objects ...client.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objects))
	for _, obj := range objects {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return nil, fmt.Errorf("finding the kind of %T: %w", obj, err)
		}
		m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("converting %T: %w", obj, err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvks[0])
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, u)
	}
	return out, nil
}

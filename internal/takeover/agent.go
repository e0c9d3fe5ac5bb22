package takeover

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AgentObject is one object of KLM's runtime agent.
type AgentObject struct {
	GVK        schema.GroupVersionKind
	Name       string
	Namespaced bool
}

// Key is the object's key in a runtime whose sync namespace is namespace.
func (o AgentObject) Key(namespace string) client.ObjectKey {
	if o.Namespaced {
		return client.ObjectKey{Namespace: namespace, Name: o.Name}
	}
	return client.ObjectKey{Name: o.Name}
}

// Agent are the objects of KLM's runtime agent, skr-webhook
// (skr-webhook/resources.yaml, pkg/watcher/skr_webhook_manifest_manager.go),
// all in the sync namespace but the PriorityClass and the webhook
// configuration, which comes first: removed first, no request waits on a
// webhook whose server is going. KLM labels each ManagedByLabel=kyma.
var Agent = []AgentObject{
	{admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"), "skr-webhook", false},
	{appsv1.SchemeGroupVersion.WithKind("Deployment"), "skr-webhook", true},
	{corev1.SchemeGroupVersion.WithKind("Service"), "skr-webhook", true},
	{corev1.SchemeGroupVersion.WithKind("Service"), "skr-webhook-metrics", true},
	{corev1.SchemeGroupVersion.WithKind("Secret"), "skr-webhook-tls", true},
	{schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"), "skr-webhook-priority", false},
	{networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), "kyma-project.io--seed-to-watcher", true},
	{networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), "kyma-project.io--watcher-to-apiserver", true},
	{networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), "kyma-project.io--metrics-to-watcher", true},
	{networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), "kyma-project.io--watcher-to-dns", true},
}

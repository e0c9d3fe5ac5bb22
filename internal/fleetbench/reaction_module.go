package fleetbench

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// The reaction benchmark's modules are realistic in shape: a CRD, a manager
// Deployment and a default custom resource, as a module team ships them.
// Each module has a CRD group of its own, so that any number of them can
// be installed side by side in one runtime.
const (
	reactionCR   = "default"
	reactionKind = "Reaction"
)

// reactionManager names a module's manager Deployment.
func reactionManager(module string) string {
	return module + "-manager"
}

// reactionModuleNames are the names of n reaction modules: reaction-alpha …
func reactionModuleNames(n int) []string {
	names := ModuleNames(n)
	for i, name := range names {
		names[i] = "reaction-" + strings.TrimPrefix(name, "bench-")
	}
	return names
}

// reactionGroup is a module's CRD group.
func reactionGroup(module string) string {
	return module + ".reaction.runtime-fleet.dev"
}

// reactionGVR is a module's custom resource.
func reactionGVR(module string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: reactionGroup(module), Version: "v1", Resource: "reactions"}
}

func reactionCRD(module string) []byte {
	return fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: reactions.%[1]s
spec:
  group: %[1]s
  names: {kind: %[2]s, listKind: %[2]sList, plural: reactions, singular: reaction}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, reactionGroup(module), reactionKind)
}

// reactionManifest is the module's workload: its manager Deployment, in the
// runtime's sync namespace.
func reactionManifest(module string) []byte {
	return fmt.Appendf(nil, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
        - name: manager
          image: example.invalid/%[2]s:1.0.0
`, reactionManager(module), module)
}

// publishReactionModules pushes every module and creates its
// ModuleTemplate (with the default CR and the manager named) and
// ModuleReleaseMeta in each namespace.
func publishReactionModules(ctx context.Context, c client.Client, registryHost string, modules, namespaces []string) error {
	for _, module := range modules {
		content := ociartifact.Module{RawManifest: reactionManifest(module), CRDs: reactionCRD(module)}
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/reaction/%s:%s", registryHost, module, installVersion),
			content.Layers(), ociartifact.Insecure())
		if err != nil {
			return fmt.Errorf("pushing module %s: %w", module, err)
		}
		for _, ns := range namespaces {
			if err := createReactionTemplate(ctx, c, ns, module, artifact.Links); err != nil {
				return err
			}
		}
	}
	return nil
}

func createReactionTemplate(ctx context.Context, c client.Client, namespace, module string, links map[string]string) error {
	template := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: module + "-" + installVersion, Namespace: namespace},
		Spec: v1beta2.ModuleTemplateSpec{
			ModuleName: module,
			Version:    installVersion,
			Data: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": reactionGroup(module) + "/v1", "kind": reactionKind,
				"metadata": map[string]any{"name": reactionCR}, "spec": map[string]any{"replicas": int64(1)},
			}},
			Manager: &v1beta2.Manager{
				GroupVersionKind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
				Name:             reactionManager(module),
			},
		},
	}
	for _, name := range []string{v1beta2.RawManifestResourceName, v1beta2.CRDsResourceName} {
		template.Spec.Resources = append(template.Spec.Resources, v1beta2.ContentResource{Name: name, Link: links[name]})
	}
	if err := c.Create(ctx, template); err != nil {
		return fmt.Errorf("creating ModuleTemplate %s: %w", template.Name, err)
	}
	return createReleaseMeta(ctx, c, namespace, module)
}

// standIn plays a module's own operator in a runtime that has no
// controllers or kubelets: it makes the manager Deployment Available and
// the default CR Ready, as kube-controller-manager, the kubelet and the
// module's operator would.
type standIn struct {
	runtime   client.Client
	namespace string
	module    string
}

// waitInstalled waits until the operator applied the module's manager and
// default CR.
func (s standIn) waitInstalled(ctx context.Context) error {
	var missing error
	err := poll(ctx, 10*time.Millisecond, func() (bool, error) {
		if missing = s.runtime.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: reactionManager(s.module)}, &appsv1.Deployment{}); missing != nil {
			return false, client.IgnoreNotFound(missing)
		}
		if missing = s.runtime.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: reactionCR}, s.cr()); missing != nil {
			return false, ignoreMissing(missing)
		}
		return true, nil
	})
	if err != nil && missing != nil {
		return fmt.Errorf("%w (last: %w)", err, missing)
	}
	return err
}

func (s standIn) cr() *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	gvr := reactionGVR(s.module)
	cr.SetGroupVersionKind(gvr.GroupVersion().WithKind(reactionKind))
	return cr
}

// becomeReady makes the manager Available, then the CR Ready, and returns
// when both writes are stored: the moment the module is ready.
func (s standIn) becomeReady(ctx context.Context) (time.Time, error) {
	deploy := &appsv1.Deployment{}
	if err := s.runtime.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: reactionManager(s.module)}, deploy); err != nil {
		return time.Time{}, fmt.Errorf("reading the manager: %w", err)
	}
	now := metav1.Now()
	deploy.Status = appsv1.DeploymentStatus{
		ObservedGeneration: deploy.Generation,
		Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	if err := s.runtime.Status().Update(ctx, deploy); err != nil {
		return time.Time{}, fmt.Errorf("making the manager Available: %w", err)
	}
	cr := s.cr()
	if err := s.runtime.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: reactionCR}, cr); err != nil {
		return time.Time{}, fmt.Errorf("reading the default CR: %w", err)
	}
	if err := unstructured.SetNestedField(cr.Object, string(v1beta2.StateReady), "status", "state"); err != nil {
		return time.Time{}, err
	}
	if err := s.runtime.Status().Update(ctx, cr); err != nil {
		return time.Time{}, fmt.Errorf("making the default CR Ready: %w", err)
	}
	return time.Now(), nil
}

// poll calls check every interval until it is done, fails or ctx ends.
func poll(ctx context.Context, interval time.Duration, check func() (bool, error)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ticker.C:
		}
	}
}

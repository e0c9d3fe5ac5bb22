package fleetbench

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// The lone-runtime benchmark's modules are shaped and sized like the public
// Kyma modules: each ships its own CRD (whose status schema has a required
// field), a ValidatingWebhookConfiguration without a caBundle whose
// service does not exist (failurePolicy Ignore, matching only its own
// group), a ServiceAccount with a ClusterRole and its binding, a
// PriorityClass, its manager Deployment and a Service, and ConfigMaps: 9 to
// 30 objects, the largest module's manifest about 0.5 MB.
const (
	loneKind    = "Module"
	lonePlural  = "modules"
	loneCR      = "default"
	loneMaxSize = 500 << 10
	// lonePadChunk is the size of one padding value, as a module's
	// ConfigMaps carry configuration.
	lonePadChunk = 4 << 10
)

// loneModule is one module of the lone-runtime benchmark.
type loneModule struct {
	name       string
	configMaps int // 1 for the first module, 22 for the last: 9 to 30 objects
	padding    int // bytes of ConfigMap data
}

// loneModules are n modules for repetition rep, with names no other
// repetition uses (cluster-scoped objects of a removed module may still be
// going away), their object counts and sizes spread from the smallest to
// the largest.
func loneModules(n, rep int) []loneModule {
	names := ModuleNames(n * (rep + 1))[n*rep:]
	modules := make([]loneModule, n)
	for i := range modules {
		spread := 1.0
		if n > 1 {
			spread = float64(i) / float64(n-1)
		}
		modules[i] = loneModule{
			name:       "lone-" + strings.TrimPrefix(names[i], "bench-"),
			configMaps: 1 + int(21*spread),
			padding:    int(float64(loneMaxSize) * (0.05 + 0.95*spread)),
		}
	}
	return modules
}

func (m loneModule) group() string   { return m.name + ".lone.runtime-fleet.dev" }
func (m loneModule) manager() string { return m.name + "-manager" }

// gvr is the module's custom resource.
func (m loneModule) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: m.group(), Version: "v1", Resource: lonePlural}
}

// objects counts the module's objects in the runtime, its default CR
// included.
func (m loneModule) objects() int { return 8 + m.configMaps + 1 }

func (m loneModule) crd() []byte {
	return fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  names: {kind: %[2]s, listKind: %[2]sList, plural: %[3]s, singular: module}
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
            spec:
              type: object
              properties:
                replicas: {type: integer, minimum: 1}
                logLevel: {type: string, enum: [debug, info, warn, error]}
            status:
              type: object
              required: [state]
              properties:
                state: {type: string, enum: [Processing, Ready, Warning, Error, Deleting]}
                conditions:
                  type: array
                  items:
                    type: object
                    required: [type, status]
                    properties:
                      type: {type: string}
                      status: {type: string}
                      reason: {type: string}
                      message: {type: string}
`, m.group(), loneKind, lonePlural)
}

// manifest is the module's raw manifest: everything but its CRD and
// default CR, without namespaces on the namespaced objects (they land in
// the sync namespace), the webhook's service in syncNamespace.
func (m loneModule) manifest(syncNamespace string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[1]s-validating
webhooks:
  - name: validate.%[2]s
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
    timeoutSeconds: 2
    clientConfig:
      service: {name: %[1]s-webhook, namespace: %[3]s, path: /validate, port: 443}
    rules:
      - apiGroups: [%[2]s]
        apiVersions: ["*"]
        operations: [CREATE, UPDATE]
        resources: ["*"]
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[4]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[4]s
rules:
  - apiGroups: [%[2]s]
    resources: ["*"]
    verbs: [get, list, watch, update, patch]
  - apiGroups: [""]
    resources: [configmaps, secrets, services]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %[4]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[4]s}
subjects:
  - {kind: ServiceAccount, name: %[4]s, namespace: %[3]s}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: %[1]s-priority
value: 1000
globalDefault: false
description: priority of the %[1]s module's workloads
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[4]s
spec:
  replicas: 1
  selector: {matchLabels: {app: %[4]s}}
  template:
    metadata: {labels: {app: %[4]s}}
    spec:
      serviceAccountName: %[4]s
      priorityClassName: %[1]s-priority
      containers:
        - name: manager
          image: example.invalid/%[1]s:1.0.0
          args: [--leader-elect]
          resources: {requests: {cpu: 10m, memory: 64Mi}, limits: {memory: 256Mi}}
---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s-webhook
spec:
  selector: {app: %[4]s}
  ports: [{port: 443, targetPort: 9443}]
`, m.name, m.group(), syncNamespace, m.manager())
	perMap := m.padding / m.configMaps
	for c := range m.configMaps {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-config-%d\ndata:\n", m.name, c)
		for k, left := 0, perMap; left > 0; k, left = k+1, left-lonePadChunk {
			fmt.Fprintf(&b, "  key-%d: %q\n", k, strings.Repeat("x", min(left, lonePadChunk)))
		}
	}
	return []byte(b.String())
}

// publishLoneModules pushes each module and creates its ModuleTemplate
// (default CR and manager named) and ModuleReleaseMeta in namespace.
func publishLoneModules(ctx context.Context, c client.Client, registryHost, namespace, syncNamespace string, modules []loneModule) error {
	for _, m := range modules {
		content := ociartifact.Module{RawManifest: m.manifest(syncNamespace), CRDs: m.crd()}
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/lone/%s:%s", registryHost, m.name, installVersion),
			content.Layers(), ociartifact.Insecure())
		if err != nil {
			return fmt.Errorf("pushing module %s: %w", m.name, err)
		}
		template := &v1beta2.ModuleTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: m.name + "-" + installVersion, Namespace: namespace},
			Spec: v1beta2.ModuleTemplateSpec{
				ModuleName: m.name,
				Version:    installVersion,
				Data: &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": m.group() + "/v1", "kind": loneKind,
					"metadata": map[string]any{"name": loneCR}, "spec": map[string]any{"replicas": int64(1), "logLevel": "info"},
				}},
				Manager: &v1beta2.Manager{
					GroupVersionKind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
					Name:             m.manager(),
				},
			},
		}
		for _, name := range []string{v1beta2.RawManifestResourceName, v1beta2.CRDsResourceName} {
			template.Spec.Resources = append(template.Spec.Resources, v1beta2.ContentResource{Name: name, Link: artifact.Links[name]})
		}
		if err := c.Create(ctx, template); err != nil {
			return fmt.Errorf("creating ModuleTemplate %s: %w", template.Name, err)
		}
		if err := createReleaseMeta(ctx, c, namespace, m.name); err != nil {
			return err
		}
	}
	return nil
}

package analysis

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
)

// analyseCondition runs a condition analysis for kymas into out: the
// condition of the module's custom resource, read from each runtime.
//
// The Manifest's status does not carry the resource's conditions (only a
// state derived from status.state), so each runtime is read, through the
// operator's runtime clients.
func (a *Analyzer) analyseCondition(ctx context.Context, wg *sync.WaitGroup, module, name string, c *v1beta2.ConditionAnalysis, kymas []string, out []verdict) {
	for i, k := range kymas {
		a.start(ctx, wg, func(ctx context.Context) {
			out[i] = a.condition(ctx, module, name, c, k)
		})
	}
}

func (a *Analyzer) condition(ctx context.Context, module, name string, c *v1beta2.ConditionAnalysis, kymaName string) verdict {
	manifest := &v1beta2.Manifest{}
	key := client.ObjectKey{Namespace: a.fleet.Namespace, Name: kyma.ManifestName(kymaName, module)}
	if err := a.fleet.Manifests.Get(ctx, key, manifest); err != nil {
		return inconclusive(name, "reading Manifest %s: %s", key.Name, err)
	}
	if manifest.Spec.Resource == nil {
		return failed(name, "module %s has no custom resource (its Manifest has no spec.resource) to read condition %s of", module, c.Type)
	}
	cluster, err := a.fleet.Runtimes.Get(ctx, kymaName)
	if err != nil {
		return inconclusive(name, "reaching the runtime: %s", err)
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(manifest.Spec.Resource.GroupVersionKind())
	crKey := client.ObjectKey{Namespace: manifest.Spec.Resource.GetNamespace(), Name: manifest.Spec.Resource.GetName()}
	subject := fmt.Sprintf("%s %s", cr.GetKind(), crKey.Name)
	if crKey.Namespace == "" {
		// Placed as the Manifest controller places it: a namespaced
		// resource that names no namespace is in the sync namespace.
		namespaced, err := transform.RESTMapperScope(cluster.Mapper)(cr.GroupVersionKind())
		if err != nil {
			a.fleet.Runtimes.EvictOnError(kymaName, err)
			return inconclusive(name, "looking up kind %s in the runtime: %s", cr.GroupVersionKind().Kind, err)
		}
		if namespaced {
			crKey.Namespace = manifest.Spec.SyncNamespace
			if crKey.Namespace == "" {
				crKey.Namespace = a.fleet.SyncNamespace
			}
		}
	}
	if crKey.Namespace != "" {
		subject = fmt.Sprintf("%s %s/%s", cr.GetKind(), crKey.Namespace, crKey.Name)
	}
	if err := cluster.Client.Get(ctx, crKey, cr); err != nil {
		if apierrors.IsNotFound(err) {
			return failed(name, "%s does not exist", subject)
		}
		a.fleet.Runtimes.EvictOnError(kymaName, err)
		return inconclusive(name, "reading %s: %s", subject, err)
	}
	return judgeCondition(name, subject, c, cr)
}

// judgeCondition finds the condition in the resource's status.conditions
// and compares its status. A condition written for an older generation of
// the resource is inconclusive: the resource's controller has not looked
// at its present spec yet.
func judgeCondition(name, subject string, c *v1beta2.ConditionAnalysis, cr *unstructured.Unstructured) verdict {
	want := c.Status
	if want == "" {
		want = metav1.ConditionTrue
	}
	conditions, _, err := unstructured.NestedSlice(cr.Object, "status", "conditions")
	if err != nil {
		return failed(name, "%s has malformed status.conditions", subject)
	}
	for _, raw := range conditions {
		cond, ok := raw.(map[string]any)
		if !ok || cond["type"] != c.Type {
			continue
		}
		observed, _, _ := unstructured.NestedInt64(cond, "observedGeneration")
		if observed > 0 && observed < cr.GetGeneration() {
			return inconclusive(name, "condition %s of %s describes generation %d, the resource is at %d", c.Type, subject, observed, cr.GetGeneration())
		}
		status, _ := cond["status"].(string)
		if metav1.ConditionStatus(status) == want {
			return verdict{}
		}
		if reason, _ := cond["reason"].(string); reason != "" {
			status += " (" + reason + ")"
		}
		return failed(name, "condition %s of %s is %s, not %s", c.Type, subject, status, want)
	}
	return failed(name, "%s has no condition %s", subject, c.Type)
}

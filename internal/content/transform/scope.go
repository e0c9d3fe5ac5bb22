package transform

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ScopeFunc says whether objects of a kind are namespaced; it fails for a
// kind the runtime does not know.
type ScopeFunc func(schema.GroupVersionKind) (namespaced bool, err error)

// RESTMapperScope answers from a runtime's RESTMapper (discovery).
func RESTMapperScope(mapper meta.RESTMapper) ScopeFunc {
	return func(gvk schema.GroupVersionKind) (bool, error) {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return false, err
		}
		return mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
	}
}

var crdGroupKind = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition").GroupKind()

// scopes tells for each object whether it is namespaced. Kinds defined by a
// CRD in the same batch take that CRD's scope: the runtime cannot know them
// before the batch is applied.
func scopes(objs []*unstructured.Unstructured, scope ScopeFunc) ([]bool, error) {
	defined, err := crdScopes(objs)
	if err != nil {
		return nil, err
	}
	known := map[schema.GroupVersionKind]bool{}
	namespaced := make([]bool, len(objs))
	for i, obj := range objs {
		gvk := obj.GroupVersionKind()
		if n, ok := defined[gvk.GroupKind()]; ok {
			namespaced[i] = n
			continue
		}
		n, ok := known[gvk]
		if !ok {
			if n, err = scope(gvk); err != nil {
				return nil, fmt.Errorf("%s %q: kind %s: %w", obj.GetKind(), obj.GetName(), gvk, err)
			}
			known[gvk] = n
		}
		namespaced[i] = n
	}
	return namespaced, nil
}

// crdScopes maps each kind defined by a CRD among objs to whether it is
// namespaced.
func crdScopes(objs []*unstructured.Unstructured) (map[schema.GroupKind]bool, error) {
	defined := map[schema.GroupKind]bool{}
	for _, obj := range objs {
		if obj.GroupVersionKind().GroupKind() != crdGroupKind {
			continue
		}
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope")
		if group == "" || kind == "" {
			return nil, fmt.Errorf("CustomResourceDefinition %q: spec.group and spec.names.kind are required", obj.GetName())
		}
		switch apiextensionsv1.ResourceScope(scope) {
		case apiextensionsv1.NamespaceScoped:
			defined[schema.GroupKind{Group: group, Kind: kind}] = true
		case apiextensionsv1.ClusterScoped:
			defined[schema.GroupKind{Group: group, Kind: kind}] = false
		default:
			return nil, fmt.Errorf("CustomResourceDefinition %q: spec.scope %q is neither Namespaced nor Cluster", obj.GetName(), scope)
		}
	}
	return defined, nil
}

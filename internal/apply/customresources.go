package apply

import (
	"context"
	"fmt"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// EnsureCustomResource creates the module's default custom resource when it
// is absent. An existing one is never overwritten: after creation it belongs
// to the runtime owner. It reports whether it created the resource.
func EnsureCustomResource(ctx context.Context, c client.Client, cr *unstructured.Unstructured) (bool, error) {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(cr.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(cr), existing)
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading %s %s: %w", cr.GetKind(), client.ObjectKeyFromObject(cr), err)
	}
	if err := c.Create(ctx, cr.DeepCopy(), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("creating %s %s: %w", cr.GetKind(), client.ObjectKeyFromObject(cr), err)
	}
	return true, nil
}

// DeleteCustomResource deletes the module's default custom resource and
// reports whether it is gone.
func DeleteCustomResource(ctx context.Context, c client.Client, cr *unstructured.Unstructured) (bool, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(cr.GroupVersionKind())
	obj.SetName(cr.GetName())
	obj.SetNamespace(cr.GetNamespace())
	err := c.Delete(ctx, obj)
	switch {
	case err == nil:
		return false, nil // deletion started; the module operator finishes it
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return true, nil
	default:
		return false, fmt.Errorf("deleting %s %s: %w", cr.GetKind(), client.ObjectKeyFromObject(cr), err)
	}
}

// RemainingCustomResources lists, for every CRD in the inventory, the custom
// resources of it that still exist in the runtime. Module removal waits until
// there are none, so that module operators can clean up what they created.
// It returns "Kind namespace/name" strings, sorted, at most limit of them,
// and the total count.
func RemainingCustomResources(ctx context.Context, c client.Client, inventory []v1beta2.Resource, limit int) ([]string, int, error) {
	var found []string
	for _, r := range inventory {
		if r.Kind != "CustomResourceDefinition" || r.Group != apiextensionsv1.GroupName {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: r.Name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, 0, fmt.Errorf("reading CRD %s: %w", r.Name, err)
		}
		version := storageVersion(crd)
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
		if err := c.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, 0, fmt.Errorf("listing %s: %w", crd.Spec.Names.Plural, err)
		}
		for _, item := range list.Items {
			name := item.GetName()
			if ns := item.GetNamespace(); ns != "" {
				name = ns + "/" + name
			}
			found = append(found, crd.Spec.Names.Kind+" "+name)
		}
	}
	sort.Strings(found)
	total := len(found)
	if len(found) > limit {
		found = found[:limit]
	}
	return found, total, nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

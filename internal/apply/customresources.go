package apply

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// CustomResourceState is what EnsureCustomResource found or did.
type CustomResourceState int

const (
	// CustomResourceCreated means: it did not exist and was created.
	CustomResourceCreated CustomResourceState = iota
	// CustomResourceExists means: it exists and is the module's.
	CustomResourceExists
	// CustomResourceNotOurs means: a resource of that name exists and is not the
	// module's (the runtime owner created it). It is used as it is and never
	// deleted with the module.
	CustomResourceNotOurs
)

// EnsureCustomResource creates the module's default custom resource when it
// is absent. An existing one is never overwritten: after creation its spec
// belongs to the runtime owner.
func EnsureCustomResource(ctx context.Context, c client.Client, cr *unstructured.Unstructured, owner Owner) (CustomResourceState, error) {
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(cr.GroupVersionKind())
	subject := describe(cr.GetKind(), cr.GetNamespace(), cr.GetName())
	err := c.Get(ctx, client.ObjectKeyFromObject(cr), existing)
	if err == nil {
		if owner.Owns(existing.Labels) {
			return CustomResourceExists, nil
		}
		return CustomResourceNotOurs, nil
	}
	if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("reading %s: %w", subject, err)
	}
	if err := c.Create(ctx, cr.DeepCopy(), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return CustomResourceExists, nil // the next reconcile looks at whose it is
		}
		return 0, fmt.Errorf("creating %s: %w", subject, err)
	}
	return CustomResourceCreated, nil
}

// CustomResourceDeletion is what DeleteCustomResource found or did.
type CustomResourceDeletion int

const (
	// CustomResourceGone means: it does not exist (any more).
	CustomResourceGone CustomResourceDeletion = iota
	// CustomResourceDeleting means: its deletion started; the module's operator
	// finishes it.
	CustomResourceDeleting
	// CustomResourceLeft means: it is not the module's and was left alone.
	CustomResourceLeft
)

// DeleteCustomResource deletes the module's default custom resource if it is
// the module's: one that the runtime owner created under the same name is
// never deleted.
func DeleteCustomResource(ctx context.Context, c client.Client, cr *unstructured.Unstructured, owner Owner) (CustomResourceDeletion, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(cr.GroupVersionKind())
	subject := describe(cr.GetKind(), cr.GetNamespace(), cr.GetName())
	if err := c.Get(ctx, client.ObjectKeyFromObject(cr), live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return CustomResourceGone, nil
		}
		return 0, fmt.Errorf("reading %s: %w", subject, err)
	}
	if !owner.Owns(live.Labels) {
		return CustomResourceLeft, nil
	}
	if live.DeletionTimestamp != nil {
		return CustomResourceDeleting, nil
	}
	err := deleteExactly(ctx, c, cr.GroupVersionKind(), live.ObjectMeta)
	switch {
	case err == nil:
		return CustomResourceDeleting, nil
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return CustomResourceGone, nil
	default:
		return 0, fmt.Errorf("deleting %s: %w", subject, err)
	}
}

// CustomResources are the custom resources of a module's CRDs that exist in
// a runtime, split by whose they are.
type CustomResources struct {
	// Own carry the module's labels: shipped by its content, or its default
	// custom resource. The module removes them itself.
	Own []v1beta2.Resource
	// Others are not the module's: a user's, or ones it released. They
	// block the module's removal, since deleting the CRD would delete them.
	Others []v1beta2.Resource
}

// CustomResourcesOf lists, for every CRD in the inventory, the custom
// resources of it that exist in the runtime (metadata only), in a stable
// order, split by owner. Module removal waits until there are none, so that
// module operators can clean up what they created and no user's resource is
// deleted with its CRD.
func CustomResourcesOf(ctx context.Context, c client.Client, inventory []v1beta2.Resource, owner Owner) (CustomResources, error) {
	var found CustomResources
	for _, r := range inventory {
		if !isCRD(r) {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: r.Name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return CustomResources{}, fmt.Errorf("reading CRD %s: %w", r.Name, err)
		}
		version := storageVersion(crd)
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
		if err := c.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return CustomResources{}, fmt.Errorf("listing %s: %w", crd.Spec.Names.Plural, err)
		}
		for _, item := range list.Items {
			res := v1beta2.Resource{
				GroupVersionKind: metav1.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind},
				Name:             item.GetName(),
				Namespace:        item.GetNamespace(),
			}
			if owner.Owns(item.GetLabels()) {
				found.Own = append(found.Own, res)
			} else {
				found.Others = append(found.Others, res)
			}
		}
	}
	sortResources(found.Own)
	sortResources(found.Others)
	return found, nil
}

func sortResources(rs []v1beta2.Resource) {
	sort.Slice(rs, func(i, j int) bool { return key(rs[i]) < key(rs[j]) })
}

// InInventory splits resources into those that are in the inventory (by
// group, kind, namespace and name) and the others.
func InInventory(resources, inventory []v1beta2.Resource) (in, out []v1beta2.Resource) {
	known := make(map[string]bool, len(inventory))
	for _, r := range inventory {
		known[key(r)] = true
	}
	for _, r := range resources {
		if known[key(r)] {
			in = append(in, r)
		} else {
			out = append(out, r)
		}
	}
	return in, out
}

// Describe names resources for people ("Kind namespace/name"), at most limit
// of them, with how many more there are.
func Describe(resources []v1beta2.Resource, limit int) string {
	names := make([]string, 0, min(len(resources), limit))
	for i, r := range resources {
		if i == limit {
			names = append(names, fmt.Sprintf("and %d more", len(resources)-i))
			break
		}
		names = append(names, describe(r.Kind, r.Namespace, r.Name))
	}
	return strings.Join(names, ", ")
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

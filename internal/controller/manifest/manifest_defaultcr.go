package manifest

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// The module's default custom resources (issue 32). The default custom
// resource is not in the inventory (status.synced): it is never applied,
// since its spec is the runtime owner's once it exists, and its operator
// writes its status often, which the drift check must not take for drift.
// So it is recorded apart, in status.defaultResources, while it exists and
// carries the module's labels. A new version may name another one (a new
// name, kind or namespace): the earlier one stays recorded, and so stays
// the module's, until it is gone. Under CreateAndDelete it is deleted once
// the new one exists; its operator finalizes it. On removal every recorded
// one is deleted with the module's other custom resources.
//
// A Manifest from before the record has none: its current default custom
// resource is recorded at its next reconcile (one status write), and on
// removal any custom resource of the module's CRDs that carries the
// module's labels is recorded and deleted, so that an earlier default
// custom resource nobody recorded cannot hold the removal for ever.

// ensureDefaultCustomResources makes sure the module's default custom
// resource exists (ensureCustomResource), keeps the record of the module's
// default custom resources, and deletes the earlier ones under
// CreateAndDelete. It returns the earlier ones that are still being
// finalized.
func (r *Reconciler) ensureDefaultCustomResources(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, cr *unstructured.Unstructured) ([]v1beta2.Resource, error) {
	state, err := r.ensureCustomResource(ctx, cluster, manifest, cr)
	if err != nil {
		return nil, err
	}
	var current *v1beta2.Resource
	if cr != nil {
		res := resourceOf(cr)
		current = &res
		if state == apply.CustomResourceNotOurs {
			manifest.Status.DefaultResources = withoutResource(manifest.Status.DefaultResources, res)
		} else {
			manifest.Status.DefaultResources = withResource(manifest.Status.DefaultResources, res)
		}
	}
	earlier := earlierDefaults(manifest.Status.DefaultResources, current)
	if len(earlier) == 0 {
		return nil, nil
	}
	replace := manifest.Spec.CustomResourcePolicy != v1beta2.CustomResourcePolicyIgnore
	var writer client.Client
	if replace {
		if writer, err = r.writer(cluster, manifest); err != nil {
			return nil, err
		}
	}
	owner := r.owner(manifest)
	var finalizing []v1beta2.Resource
	for _, res := range earlier {
		live, served, err := readCustomResource(ctx, cluster.Client, cluster.Mapper, res)
		if err != nil {
			return nil, err
		}
		if live != nil && served != res {
			// Its CRD serves it at another version now: record that one.
			manifest.Status.DefaultResources = withResource(manifest.Status.DefaultResources, served)
			res = served
		}
		switch {
		case live == nil || !owner.Owns(live.Labels):
			// Gone, or someone took it over by removing its labels: no
			// longer the module's to delete.
			manifest.Status.DefaultResources = withoutResource(manifest.Status.DefaultResources, res)
		case !replace:
			// Under Ignore nothing is deleted: it stays the module's, and
			// goes when the module is removed.
		case live.DeletionTimestamp != nil:
			finalizing = append(finalizing, res)
		default:
			if _, err := apply.DeleteCustomResource(ctx, writer, objectOf(res), owner); err != nil {
				return nil, err
			}
			r.events.Normal(manifest, "CustomResourceReplaced", fmt.Sprintf(
				"Deleting %s: the module's version %s names %s as its default custom resource",
				apply.Describe([]v1beta2.Resource{res}, 1), manifest.Spec.Version, nameOrNone(current)))
			finalizing = append(finalizing, res)
		}
	}
	return finalizing, nil
}

// deleteDefaultCustomResources starts deleting, on the module's removal,
// every default custom resource of the module: the current one
// (deleteDefaultCustomResource), the recorded ones, and any custom resource
// of the module's CRDs that carries the module's labels and is not in the
// inventory (an earlier default custom resource that a Manifest from before
// the record did not record, or a copy of the default custom resource that
// kept the module's labels). These are recorded first, so that the module's
// identity is granted their deletion (manifest_access.go). Only what
// carries the module's labels is deleted; the record drops what is gone.
func (r *Reconciler) deleteDefaultCustomResources(ctx context.Context, cluster *remote.Cluster, writer client.Client, manifest *v1beta2.Manifest) error {
	if err := r.deleteDefaultCustomResource(ctx, cluster, writer, manifest); err != nil {
		return err
	}
	owner := r.owner(manifest)
	crs, err := apply.CustomResourcesOf(ctx, writer, manifest.Status.Synced, owner)
	if err != nil {
		return err
	}
	_, unshipped := apply.InInventory(crs.Own, manifest.Status.Synced)
	for _, res := range unshipped {
		manifest.Status.DefaultResources = withResource(manifest.Status.DefaultResources, res)
	}
	var kept []v1beta2.Resource
	for _, res := range manifest.Status.DefaultResources {
		res, ok, err := servedVersion(cluster.Mapper, res)
		if err != nil {
			return err
		}
		if !ok {
			continue // its kind is not served any more: it is gone with its CRD
		}
		deletion, err := apply.DeleteCustomResource(ctx, writer, objectOf(res), owner)
		if err != nil {
			return err
		}
		if deletion == apply.CustomResourceDeleting {
			kept = append(kept, res)
		}
	}
	manifest.Status.DefaultResources = kept
	return nil
}

// replacingDefaultCustomResources is the outcome of a module whose earlier
// default custom resources are being finalized by its operator.
func replacingDefaultCustomResources(finalizing []v1beta2.Resource, after time.Duration) reconciler.Outcome {
	return reconciler.Progressing(ReasonProcessing, fmt.Sprintf(
		"Waiting for the module's operator to finalize the module's earlier default custom resource, which its version no longer names: %s",
		apply.Describe(finalizing, maxNamed)), after)
}

// readCustomResource reads the metadata of a recorded custom resource, at
// a version its kind is served at (servedVersion), and returns it with that
// version: nil when it, or its kind, does not exist.
func readCustomResource(ctx context.Context, c client.Reader, mapper meta.RESTMapper, res v1beta2.Resource) (*metav1.PartialObjectMetadata, v1beta2.Resource, error) {
	res, ok, err := servedVersion(mapper, res)
	if err != nil || !ok {
		return nil, res, err
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind})
	err = c.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: res.Name}, live)
	switch {
	case err == nil:
		return live, res, nil
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, res, nil
	default:
		return nil, res, fmt.Errorf("reading %s: %w", apply.Describe([]v1beta2.Resource{res}, 1), err)
	}
}

// servedVersion is res at a version the runtime serves its kind at: the
// recorded one while it is served, else the preferred one (a new version
// of the module's CRD may drop the version it was recorded at; the object
// is the same). ok is false when the kind is not served at all.
func servedVersion(mapper meta.RESTMapper, res v1beta2.Resource) (v1beta2.Resource, bool, error) {
	gk := schema.GroupKind{Group: res.Group, Kind: res.Kind}
	_, err := mapper.RESTMapping(gk, res.Version)
	if err == nil {
		return res, true, nil
	}
	if !meta.IsNoMatchError(err) {
		return res, false, fmt.Errorf("looking up kind %s: %w", gk, err)
	}
	mapping, err := mapper.RESTMapping(gk)
	switch {
	case meta.IsNoMatchError(err):
		return res, false, nil
	case err != nil:
		return res, false, fmt.Errorf("looking up kind %s: %w", gk, err)
	}
	res.Version = mapping.GroupVersionKind.Version
	return res, true, nil
}

func resourceOf(obj *unstructured.Unstructured) v1beta2.Resource {
	gvk := obj.GroupVersionKind()
	return v1beta2.Resource{
		GroupVersionKind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Namespace:        obj.GetNamespace(),
		Name:             obj.GetName(),
	}
}

func objectOf(res v1beta2.Resource) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind})
	obj.SetNamespace(res.Namespace)
	obj.SetName(res.Name)
	return obj
}

func nameOrNone(res *v1beta2.Resource) string {
	if res == nil {
		return "none"
	}
	return apply.Describe([]v1beta2.Resource{*res}, 1)
}

// sameObject tells whether two resources name the same object: the version
// they are read at does not matter.
func sameObject(a, b v1beta2.Resource) bool {
	return a.Group == b.Group && a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name
}

// withResource records res, replacing a record of the same object (read at
// another version); the record is returned unchanged when it holds res
// already, so that an unchanged record costs no status write.
func withResource(recorded []v1beta2.Resource, res v1beta2.Resource) []v1beta2.Resource {
	for i, r := range recorded {
		if sameObject(r, res) {
			if r == res {
				return recorded
			}
			out := append([]v1beta2.Resource(nil), recorded...)
			out[i] = res
			return out
		}
	}
	return append(recorded[:len(recorded):len(recorded)], res)
}

// withoutResource drops the record of res's object; nil when nothing is
// left, so that the field is omitted.
func withoutResource(recorded []v1beta2.Resource, res v1beta2.Resource) []v1beta2.Resource {
	var out []v1beta2.Resource
	for _, r := range recorded {
		if !sameObject(r, res) {
			out = append(out, r)
		}
	}
	if len(out) == len(recorded) {
		return recorded
	}
	return out
}

// earlierDefaults are the recorded default custom resources other than the
// current one (nil: the module's version names none, or it is Ignore'd).
func earlierDefaults(recorded []v1beta2.Resource, current *v1beta2.Resource) []v1beta2.Resource {
	var earlier []v1beta2.Resource
	for _, r := range recorded {
		if current == nil || !sameObject(r, *current) {
			earlier = append(earlier, r)
		}
	}
	return earlier
}

// grantedResources are the objects, besides the content's, that the
// module's identity may write by name: the inventory and the recorded
// default custom resources, so that an earlier one can be deleted as the
// module's identity after its name left the module's version.
func grantedResources(manifest *v1beta2.Manifest) []v1beta2.Resource {
	if len(manifest.Status.DefaultResources) == 0 {
		return manifest.Status.Synced
	}
	return append(manifest.Status.Synced[:len(manifest.Status.Synced):len(manifest.Status.Synced)], manifest.Status.DefaultResources...)
}

// defaultResourcesStale tells, reading only, whether the record of the
// module's default custom resources would change at a reconcile: under
// CreateAndDelete when it holds an earlier one (to delete); under Ignore
// when an earlier one is gone or no longer the module's. The periodic check
// of a Ready Manifest (manifest_checks.go) then reconciles it; a record
// that holds only the current one costs no read.
func (r *Reconciler) defaultResourcesStale(ctx context.Context, cluster *remote.Cluster, manifest *v1beta2.Manifest, cr *unstructured.Unstructured) bool {
	var current *v1beta2.Resource
	if cr != nil {
		res := resourceOf(cr)
		current = &res
	}
	earlier := earlierDefaults(manifest.Status.DefaultResources, current)
	if len(earlier) == 0 {
		return false
	}
	if manifest.Spec.CustomResourcePolicy != v1beta2.CustomResourcePolicyIgnore {
		return true
	}
	owner := r.owner(manifest)
	for _, res := range earlier {
		live, served, err := readCustomResource(ctx, cluster.Client, cluster.Mapper, res)
		if err != nil || live == nil || !owner.Owns(live.Labels) || served != res {
			return true
		}
	}
	return false
}

// defaultReader reads through Reader and keeps the labels of the module's
// default custom resource when it reads it: the readiness check reads it
// anyway, so the periodic check learns whose it is without another read.
type defaultReader struct {
	client.Reader
	gvk    schema.GroupVersionKind
	key    client.ObjectKey
	read   bool
	labels map[string]string
}

// watchDefault is a defaultReader for cr; nil cr: nothing is kept.
func watchDefault(c client.Reader, cr *unstructured.Unstructured) *defaultReader {
	d := &defaultReader{Reader: c}
	if cr != nil {
		d.gvk, d.key = cr.GroupVersionKind(), client.ObjectKeyFromObject(cr)
	}
	return d
}

func (d *defaultReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := d.Reader.Get(ctx, key, obj, opts...)
	if err == nil && key == d.key && obj.GetObjectKind().GroupVersionKind() == d.gvk {
		d.read, d.labels = true, obj.GetLabels()
	}
	return err
}

// defaultRecordChanged tells whether what the readiness check read of the
// default custom resource disagrees with the record: the runtime owner took
// a recorded one over by removing the module's labels, or the module's one
// is not recorded yet (a Manifest from before the record).
func (r *Reconciler) defaultRecordChanged(manifest *v1beta2.Manifest, cr *unstructured.Unstructured, read *defaultReader) bool {
	if cr == nil || !read.read {
		return false
	}
	current := resourceOf(cr)
	return isRecorded(manifest, current) != r.owner(manifest).Owns(read.labels)
}

// isRecorded tells whether res is recorded as one of the module's default
// custom resources (at any version).
func isRecorded(manifest *v1beta2.Manifest, res v1beta2.Resource) bool {
	return slices.ContainsFunc(manifest.Status.DefaultResources, func(r v1beta2.Resource) bool { return sameObject(r, res) })
}

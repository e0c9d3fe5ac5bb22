package apply

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Version identifies one state of one object as far as drift goes:
// recreating it changes its UID, and ResourceVersion is VersionOf's.
type Version struct {
	UID             types.UID
	ResourceVersion string
}

// VersionOf is obj's Version. For an object whose spec changes bump
// metadata.generation (workloads, CRDs, custom resources), it is that
// generation and a digest of its labels and annotations, so that a write
// to its status alone (a Deployment rolling out, a module's operator
// reporting on its custom resource) is not taken for drift and costs no
// full check; for any other object, any write counts: its resourceVersion.
func VersionOf(obj metav1.Object) Version {
	v := Version{UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()}
	if g := obj.GetGeneration(); g > 0 {
		h := fnv.New64a()
		for _, m := range []map[string]string{obj.GetLabels(), obj.GetAnnotations()} {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				h.Write([]byte(k))
				h.Write([]byte{0})
				h.Write([]byte(m[k]))
				h.Write([]byte{0})
			}
			h.Write([]byte{1})
		}
		v.ResourceVersion = "g" + strconv.FormatInt(g, 10) + "/" + strconv.FormatUint(h.Sum64(), 36)
	}
	return v
}

// Versions are the live Versions of a module's objects, by inventory entry.
// An object that is missing, or no longer carries the module's labels, has
// no entry.
type Versions map[string]Version

// Covers reports whether v holds the same Version as o for every object of
// the inventory, and for nothing else: then no object of it was written,
// deleted or recreated between the two reads.
func (v Versions) Covers(inventory []v1beta2.Resource, o Versions) bool {
	if len(v) != len(inventory) || !maps.Equal(v, o) {
		return false
	}
	for _, r := range inventory {
		if _, ok := v[key(r)]; !ok {
			return false
		}
	}
	return true
}

// Digest is a short digest of the inventory's objects at their Versions in
// v, in inventory order; false when an object of the inventory has none.
// Two digests are equal exactly when Covers would hold, and a digest is all
// that needs to be kept between checks (a few bytes per Manifest, however
// large the module).
func (v Versions) Digest(inventory []v1beta2.Resource) (string, bool) {
	h := sha256.New()
	for _, r := range inventory {
		version, ok := v[key(r)]
		if !ok {
			return "", false
		}
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", key(r), version.UID, version.ResourceVersion)
	}
	return string(h.Sum(nil)), true
}

// A Lister lists the metadata of objects of one kind in one namespace: at
// least every object that carries the ownership labels selector names
// (managed-by and the Kyma's name, and the module's name unless the lister
// serves every module of the Kyma). ReadVersions skips objects that are not
// the module's.
type Lister func(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]metav1.PartialObjectMetadata, error)

// ModuleLister lists, through c, exactly the module's objects.
func ModuleLister(c client.Reader, owner Owner) Lister {
	return listerOf(c, client.MatchingLabels{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: owner.Kyma, v1beta2.ModuleNameLabel: owner.Module,
	})
}

// KymaLister lists, through c, the objects of every module of the Kyma, for
// a listing that the Kyma's modules share (internal/drift.Listings).
func KymaLister(c client.Reader, kyma string) Lister {
	return listerOf(c, client.MatchingLabels{v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: kyma})
}

func listerOf(c client.Reader, selector client.MatchingLabels) Lister {
	return func(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]metav1.PartialObjectMetadata, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, selector, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		return list.Items, nil
	}
}

// ReadVersions reads the Versions of the inventory's objects cheaply: one
// metadata-only List per kind and namespace, instead of a read (and a
// dry-run apply) per object. A module of twenty objects in a few kinds
// costs a few requests, and the response carries metadata only; a lister
// shared by a Kyma's modules costs less still. Objects listed that are not
// in the inventory (the module's default custom resource) or not the
// module's are ignored.
func ReadVersions(ctx context.Context, list Lister, inventory []v1beta2.Resource, owner Owner) (Versions, error) {
	type scope struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	wanted := make(map[string]bool, len(inventory))
	var scopes []scope
	seen := map[scope]bool{}
	for _, r := range inventory {
		wanted[key(r)] = true
		s := scope{gvk: schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}, namespace: r.Namespace}
		if !seen[s] {
			seen[s] = true
			scopes = append(scopes, s)
		}
	}
	versions := make(Versions, len(inventory))
	for _, s := range scopes {
		items, err := list(ctx, s.gvk, s.namespace)
		if meta.IsNoMatchError(err) {
			continue // the kind is gone, and with it the objects
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s of the module: %w", s.gvk.Kind, err)
		}
		for i := range items {
			item := &items[i]
			k := s.gvk.Group + "/" + s.gvk.Kind + "/" + item.Namespace + "/" + item.Name
			if wanted[k] && owner.Owns(item.Labels) {
				versions[k] = VersionOf(item)
			}
		}
	}
	return versions, nil
}

// Observed records, during one apply, the Version of each object as the
// runtime's API server returned it: read, dry-run applied, or written. It
// tells, without another read before the apply, at which version each
// object was verified (see Verified). Use a new one per apply; it is safe
// for the apply's concurrent requests.
type Observed struct {
	mu                    sync.Mutex
	read, dryRun, written Versions
}

// Client wraps c so that its Get, Patch and Apply responses are recorded.
func (o *Observed) Client(c client.Client) client.Client {
	return observingClient{Client: c, observed: o}
}

type observingClient struct {
	client.Client
	observed *Observed
}

func (c observingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if err == nil {
		c.observed.record(&c.observed.read, obj)
	}
	return err
}

func (c observingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	patchOpts := &client.PatchOptions{}
	patchOpts.ApplyOptions(opts)
	if len(patchOpts.DryRun) > 0 {
		c.observed.record(&c.observed.dryRun, obj)
	} else {
		c.observed.record(&c.observed.written, obj)
	}
	return nil
}

func (c observingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.Client.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	applyOpts := &client.ApplyOptions{}
	applyOpts.ApplyOptions(opts)
	// An apply configuration made from an unstructured object is that
	// object, and holds the server's answer.
	if written, ok := obj.(client.Object); ok && len(applyOpts.DryRun) == 0 {
		c.observed.record(&c.observed.written, written)
	}
	return nil
}

func (o *Observed) record(into *Versions, obj client.Object) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || obj.GetResourceVersion() == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if *into == nil {
		*into = Versions{}
	}
	(*into)[gvk.Group+"/"+gvk.Kind+"/"+obj.GetNamespace()+"/"+obj.GetName()] = VersionOf(obj)
}

// Verified are the Versions at which the apply verified the inventory's
// objects: the version it wrote, or, for an object it left alone, the
// version its dry-run was answered at when that is the very version it
// last read (so the diff compared the object the dry-run describes).
// Objects without such a version are left out.
func (o *Observed) Verified(inventory []v1beta2.Resource) Versions {
	o.mu.Lock()
	defer o.mu.Unlock()
	verified := make(Versions, len(inventory))
	for _, r := range inventory {
		k := key(r)
		if v, ok := o.written[k]; ok {
			verified[k] = v
		} else if v, ok := o.dryRun[k]; ok && o.read[k] == v {
			verified[k] = v
		}
	}
	return verified
}

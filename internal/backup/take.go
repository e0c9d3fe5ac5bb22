package backup

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// listPage is how many custom resources one list request asks for: a
// module CRD with thousands of them is read in pages, never all at once,
// so the snapshot's bound stops the reading early.
const listPage = 250

// Source is where a snapshot is read from: the control plane's Kyma and
// its Manifests, and the runtime.
type Source struct {
	Kyma *v1beta2.Kyma
	// Manifests are the Kyma's Manifests in the control plane. Their
	// inventories (status.synced) name the CRDs the modules installed, and
	// the objects the modules' content recreates by itself.
	Manifests []v1beta2.Manifest
	// Runtime reads the runtime, uncached (custom resources of any kind
	// are listed); Mapper tells namespaced kinds from cluster-scoped ones
	// there.
	Runtime client.Reader
	Mapper  meta.RESTMapper
	// SyncNamespace is the operator's; the Kyma's own wins.
	SyncNamespace string
	// IncludeSecrets takes the Secrets that the custom resources refer to
	// (SecretReferences): the schedule's includeSecrets.
	IncludeSecrets bool
	// MaxBytes bounds the snapshot, encoded; MaxSnapshotBytes when 0.
	MaxBytes int
}

// Take reads a snapshot of the runtime: the runtime's own Kyma, every
// custom resource of every CRD the runtime's modules installed, in every
// namespace, and with IncludeSecrets the Secrets they refer to.
//
// Left out are objects a recreated runtime gets back by itself: those the
// modules' content ships (in a Manifest's inventory), and those with
// ownerReferences, which their owner (typically the module's operator)
// recreates, and which a restore could not give back their owner's UID.
// Objects being deleted are left out too. A runtime whose objects do not
// fit in the bound fails the snapshot, naming the kind with the most: a
// backup that silently missed part of them would restore a different
// runtime. Any other read failure fails it as well; a kind that is not
// served (yet) is nothing to back up.
func Take(ctx context.Context, src Source, now time.Time) (*Snapshot, error) {
	k := src.Kyma
	syncNamespace := cmp.Or(k.Spec.SyncNamespace, src.SyncNamespace)
	s := &Snapshot{
		Format: FormatVersion, Kyma: k.Name, TakenAt: now.UTC().Truncate(time.Second),
		Labels: maps.Clone(k.Labels), Annotations: keptAnnotations(k.Annotations),
		Spec: *k.Spec.DeepCopy(),
	}
	var err error
	if s.RuntimeKyma, err = readRuntimeKyma(ctx, src.Runtime, client.ObjectKey{Namespace: syncNamespace, Name: v1beta2.DefaultRuntimeKymaName}); err != nil {
		return nil, err
	}
	t := &taker{src: src, snapshot: s, budget: newBudget(src.MaxBytes), taken: map[objectKey]bool{}, shipped: shipped(src.Manifests)}
	if err := t.budget.add("Kyma", s); err != nil {
		return nil, err
	}
	if err := t.defaultResources(ctx, syncNamespace); err != nil {
		return nil, err
	}
	if err := t.moduleResources(ctx); err != nil {
		return nil, err
	}
	if src.IncludeSecrets {
		if err := t.secrets(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// runtimeKymaLabels are the labels the operator puts on a runtime's own
// Kyma when it creates it: not the owner's, and set again by the
// operator on the recreated runtime.
var runtimeKymaLabels = []string{v1beta2.ManagedByLabel, v1beta2.WatchedByLabel}

// readRuntimeKyma reads what the owner set on the runtime's own Kyma; nil
// when the Kyma controller has not created it yet (the owner chose
// nothing).
func readRuntimeKyma(ctx context.Context, rt client.Reader, key client.ObjectKey) (*RuntimeKyma, error) {
	rk := &v1beta2.Kyma{}
	if err := rt.Get(ctx, key, rk); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the runtime's Kyma: %w", err)
	}
	labels := maps.Clone(rk.Labels)
	for _, l := range runtimeKymaLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		labels = nil
	}
	return &RuntimeKyma{Labels: labels, Annotations: keptAnnotations(rk.Annotations), Spec: *rk.Spec.DeepCopy()}, nil
}

// taker reads one snapshot's objects.
type taker struct {
	src      Source
	snapshot *Snapshot
	budget   *budget
	// taken are the objects in the snapshot already, so that a default
	// custom resource is not taken again with its kind.
	taken map[objectKey]bool
	// shipped are the objects the modules' content applied.
	shipped map[objectKey]bool
}

// objectKey identifies an object across versions of its kind.
type objectKey struct{ group, kind, namespace, name string }

func keyOf(obj *unstructured.Unstructured) objectKey {
	gvk := obj.GroupVersionKind()
	return objectKey{gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName()}
}

// shipped are the objects in the Manifests' inventories.
func shipped(manifests []v1beta2.Manifest) map[objectKey]bool {
	out := map[objectKey]bool{}
	for _, m := range manifests {
		for _, r := range m.Status.Synced {
			out[objectKey{r.Group, r.Kind, r.Namespace, r.Name}] = true
		}
	}
	return out
}

// defaultResources takes each module's default custom resource, found
// from the Kyma's status.modules[].resource: it is taken even when its
// CRD is not one the module installed.
func (t *taker) defaultResources(ctx context.Context, syncNamespace string) error {
	for _, m := range t.src.Kyma.Status.Modules {
		if m.Resource == nil || m.Resource.Kind == "" || m.Resource.Name == "" {
			continue
		}
		obj, err := t.readDefault(ctx, m.Resource, syncNamespace)
		if err != nil {
			return fmt.Errorf("reading the custom resource of module %s: %w", m.Name, err)
		}
		if obj == nil {
			continue
		}
		if err := t.add(Resource{Module: m.Name, Default: true, Object: obj}); err != nil {
			return err
		}
	}
	return nil
}

// readDefault reads a module's default custom resource and keeps what
// restoring it needs; nil when it does not exist.
func (t *taker) readDefault(ctx context.Context, ref *v1beta2.TrackingObject, syncNamespace string) (*unstructured.Unstructured, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	mapping, err := t.src.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	namespace := ""
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace = cmp.Or(ref.Namespace, syncNamespace)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := t.src.Runtime.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return restorable(obj), nil
}

// moduleResources takes the custom resources of every CRD in the
// Manifests' inventories, module by module.
func (t *taker) moduleResources(ctx context.Context) error {
	manifests := slices.Clone(t.src.Manifests)
	slices.SortFunc(manifests, func(a, b v1beta2.Manifest) int { return strings.Compare(moduleOf(&a), moduleOf(&b)) })
	crds := map[string]bool{}
	for i := range manifests {
		for _, r := range manifests[i].Status.Synced {
			if r.Group != apiextensionsv1.GroupName || r.Kind != "CustomResourceDefinition" || crds[r.Name] {
				continue
			}
			crds[r.Name] = true
			if err := t.customResourcesOf(ctx, moduleOf(&manifests[i]), r.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func moduleOf(m *v1beta2.Manifest) string {
	return cmp.Or(m.Spec.ModuleName, m.Labels[v1beta2.ModuleNameLabel])
}

// customResourcesOf takes the custom resources of one CRD, in every
// namespace, read page by page in a version the runtime serves.
func (t *taker) customResourcesOf(ctx context.Context, module, crdName string) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := t.src.Runtime.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading CRD %s of module %s: %w", crdName, module, err)
	}
	version := servedVersion(crd)
	if version == "" {
		return nil
	}
	listGVK := schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind}
	token := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(listGVK)
		if err := t.src.Runtime.List(ctx, list, client.Limit(listPage), client.Continue(token)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("listing the %s of module %s: %w", crd.Spec.Names.Plural, module, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			if t.leftOut(item) {
				continue
			}
			if err := t.add(Resource{Module: module, Object: restorable(item)}); err != nil {
				return err
			}
		}
		if token = list.GetContinue(); token == "" {
			return nil
		}
	}
}

// leftOut says whether an object is one a recreated runtime gets back
// without the backup, or has in it already.
func (t *taker) leftOut(obj client.Object) bool {
	gvk := obj.GetObjectKind().GroupVersionKind()
	key := objectKey{gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName()}
	return t.taken[key] || t.shipped[key] || len(obj.GetOwnerReferences()) > 0 || obj.GetDeletionTimestamp() != nil
}

// servedVersion is the version to read a CRD's objects in: the storage
// version if it is served (no conversion), else the first served one.
func servedVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	first := ""
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Storage {
			return v.Name
		}
		if first == "" {
			first = v.Name
		}
	}
	return first
}

func (t *taker) add(r Resource) error {
	if err := t.budget.add(r.Object.GetKind(), r); err != nil {
		return err
	}
	t.taken[keyOf(r.Object)] = true
	t.snapshot.Resources = append(t.snapshot.Resources, r)
	return nil
}

// secrets takes the Secrets the snapshot's custom resources refer to, in
// their own namespaces, by the rules of SecretReferences. A Secret that
// does not exist is left out (the resource waits for it as it did
// before); so are the ones secrets are left out for elsewhere: shipped by
// a module, with an owner, being deleted, and ServiceAccount tokens,
// which Kubernetes issues for the ServiceAccount's new UID.
func (t *taker) secrets(ctx context.Context) error {
	for _, r := range t.snapshot.Resources {
		namespace := r.Object.GetNamespace()
		for _, name := range SecretReferences(r.Object.Object, namespace) {
			secret := &corev1.Secret{}
			if t.taken[objectKey{"", "Secret", namespace, name}] {
				continue
			}
			if err := t.src.Runtime.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("reading Secret %s/%s, which %s %s/%s refers to: %w", namespace, name, r.Object.GetKind(), namespace, r.Object.GetName(), err)
			}
			secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret")) // the client strips it; leftOut keys by it
			if t.leftOut(secret) || secret.Type == corev1.SecretTypeServiceAccountToken {
				continue
			}
			kept := restorableSecret(secret)
			if err := t.budget.add("Secret", kept); err != nil {
				return err
			}
			t.taken[objectKey{"", "Secret", namespace, name}] = true
			t.snapshot.Secrets = append(t.snapshot.Secrets, kept)
		}
	}
	return nil
}

// restorableSecret is the part of a Secret a restore creates: identity,
// labels, annotations, type and data.
func restorableSecret(s *corev1.Secret) corev1.Secret {
	return corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace,
			Labels: s.Labels, Annotations: keptAnnotations(s.Annotations),
		},
		Type: s.Type, Data: s.Data, Immutable: s.Immutable,
	}
}

// budget keeps a snapshot within its bound while it is read, so that a
// runtime with more custom resources than a backup can hold fails early,
// naming the kind that filled it, not after every object is in memory.
type budget struct {
	max, used, objects int
	byKind             map[string]int
}

func newBudget(maxBytes int) *budget {
	if maxBytes <= 0 {
		maxBytes = MaxSnapshotBytes
	}
	return &budget{max: maxBytes, byKind: map[string]int{}}
}

// add counts v, as encoded, against the bound.
func (b *budget) add(kind string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding a %s: %w", kind, err)
	}
	b.used += len(data)
	b.objects++
	b.byKind[kind]++
	if b.used <= b.max {
		return nil
	}
	most := ""
	for k, n := range b.byKind {
		if most == "" || n > b.byKind[most] || (n == b.byKind[most] && k < most) {
			most = k
		}
	}
	return fmt.Errorf("the runtime's objects to back up are more than %d bytes, the most a backup holds so that a restore can read it (%d objects read, %d of them of kind %s): "+
		"the runtime owner has to delete the custom resources they no longer need", b.max, b.objects, b.byKind[most], most)
}

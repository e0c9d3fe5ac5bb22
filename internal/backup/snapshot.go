package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// FormatVersion is the version of the snapshot format; Decode refuses others.
const FormatVersion = 1

// Snapshot is one backup of a runtime: what its owner chose, which the
// control plane cannot give back once the runtime is gone.
type Snapshot struct {
	// Format is FormatVersion.
	Format int `json:"format"`
	// Kyma is the Kyma's name; a backup restores into a Kyma of that name.
	Kyma string `json:"kyma"`
	// TakenAt is when the snapshot was taken.
	TakenAt time.Time `json:"takenAt"`
	// Labels and Annotations are the control plane Kyma's (the runtime id,
	// the beta and internal opt-ins, selection labels).
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Spec is the control plane Kyma's spec.
	Spec v1beta2.KymaSpec `json:"spec"`
	// RuntimeModules are the modules the runtime owner lists in the
	// runtime's own Kyma.
	RuntimeModules []v1beta2.Module `json:"runtimeModules,omitempty"`
	// Resources are the modules' default custom resources as they are in
	// the runtime: what the owner configured there.
	Resources []Resource `json:"resources,omitempty"`
}

// Resource is one module custom resource: its identity, its labels and
// annotations, and every top-level field but status.
type Resource struct {
	Module string                     `json:"module"`
	Object *unstructured.Unstructured `json:"object"`
}

// Encode is the snapshot's bytes, the plaintext of a backup.
func (s *Snapshot) Encode() ([]byte, error) { return json.Marshal(s) }

// Decode reads a snapshot's bytes.
func Decode(data []byte) (*Snapshot, error) {
	s := &Snapshot{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("reading the snapshot: %w", err)
	}
	if s.Format != FormatVersion {
		return nil, fmt.Errorf("the snapshot has format %d, this version reads %d", s.Format, FormatVersion)
	}
	return s, nil
}

// Source is where a snapshot is read from: the control plane's Kyma, and
// the runtime.
type Source struct {
	Kyma *v1beta2.Kyma
	// Runtime reads the runtime; Mapper tells namespaced kinds from
	// cluster-scoped ones there.
	Runtime client.Reader
	Mapper  meta.RESTMapper
	// SyncNamespace is the operator's; the Kyma's own wins.
	SyncNamespace string
}

// Take reads a snapshot of the runtime. A module's custom resource that
// does not exist (not created yet, or its CRD not installed yet) is left out;
// any other read failure fails the snapshot, so that a backup never silently
// misses what exists.
func Take(ctx context.Context, src Source, now time.Time) (*Snapshot, error) {
	k := src.Kyma
	syncNamespace := k.Spec.SyncNamespace
	if syncNamespace == "" {
		syncNamespace = src.SyncNamespace
	}
	s := &Snapshot{
		Format: FormatVersion, Kyma: k.Name, TakenAt: now.UTC().Truncate(time.Second),
		Labels: maps.Clone(k.Labels), Annotations: keptAnnotations(k.Annotations),
		Spec: *k.Spec.DeepCopy(),
	}
	runtimeKyma := &v1beta2.Kyma{}
	err := src.Runtime.Get(ctx, client.ObjectKey{Namespace: syncNamespace, Name: v1beta2.DefaultRuntimeKymaName}, runtimeKyma)
	switch {
	case err == nil:
		s.RuntimeModules = runtimeKyma.Spec.Modules
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		// Not created yet by the Kyma controller: the owner chose nothing.
	default:
		return nil, fmt.Errorf("reading the runtime's Kyma: %w", err)
	}
	for _, m := range k.Status.Modules {
		if m.Resource == nil || m.Resource.Kind == "" || m.Resource.Name == "" {
			continue
		}
		obj, err := readResource(ctx, src, m.Resource, syncNamespace)
		if err != nil {
			return nil, fmt.Errorf("reading the custom resource of module %s: %w", m.Name, err)
		}
		if obj != nil {
			s.Resources = append(s.Resources, Resource{Module: m.Name, Object: obj})
		}
	}
	return s, nil
}

// readResource reads a module's custom resource and keeps what restoring it
// needs; nil when it does not exist.
func readResource(ctx context.Context, src Source, ref *v1beta2.TrackingObject, syncNamespace string) (*unstructured.Unstructured, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	mapping, err := src.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	namespace := ""
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace = ref.Namespace
		if namespace == "" {
			namespace = syncNamespace
		}
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := src.Runtime.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return restorable(obj), nil
}

// restorable is the part of an object a restore applies: identity, labels,
// annotations and content; nothing the API server or a controller fills in.
func restorable(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range obj.Object {
		if k != "metadata" && k != "status" {
			out.Object[k] = v
		}
	}
	out.SetAPIVersion(obj.GetAPIVersion())
	out.SetKind(obj.GetKind())
	out.SetName(obj.GetName())
	out.SetNamespace(obj.GetNamespace())
	out.SetLabels(obj.GetLabels())
	out.SetAnnotations(keptAnnotations(obj.GetAnnotations()))
	return out
}

// keptAnnotations drops kubectl's copy of the last applied object: large,
// and a restore is not a kubectl apply.
func keptAnnotations(a map[string]string) map[string]string {
	out := maps.Clone(a)
	delete(out, "kubectl.kubernetes.io/last-applied-configuration")
	if len(out) == 0 {
		return nil
	}
	return out
}

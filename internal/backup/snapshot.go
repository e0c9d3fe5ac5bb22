package backup

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// FormatVersion is the version of the snapshot format that Take writes.
// Format 1 held the modules' default custom resources and the runtime
// Kyma's module list only; format 2 adds every custom resource of the
// modules' CRDs, the runtime Kyma in full and, on request, Secrets.
const FormatVersion = 2

// oldestFormat is the oldest format Decode still reads: backups taken
// before an upgrade must restore after it.
const oldestFormat = 1

// MaxSnapshotBytes is the most a snapshot may have, encoded: a restore
// reads at most maxBackupBytes of encrypted backup, and age adds a little
// to the plaintext (a header, 16 bytes per 64 KiB), so the snapshot stays
// a mebibyte below. A backup that could not be restored is refused when
// it is taken instead.
const MaxSnapshotBytes = maxBackupBytes - 1<<20

// Snapshot is one backup of a runtime: what its owner chose, which the
// control plane cannot give back once the runtime is gone.
type Snapshot struct {
	// Format is the format the snapshot was written in (FormatVersion when
	// taken by this version); Decode brings older formats to this shape.
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
	// RuntimeKyma is the runtime's own Kyma as its owner left it; nil when
	// the runtime had none yet.
	RuntimeKyma *RuntimeKyma `json:"runtimeKyma,omitempty"`
	// RuntimeModules is format 1's record of the runtime Kyma: its module
	// list only. Decode moves it into RuntimeKyma; Take leaves it empty.
	RuntimeModules []v1beta2.Module `json:"runtimeModules,omitempty"`
	// Resources are the custom resources of the modules' CRDs as they are
	// in the runtime (format 1: the modules' default custom resources
	// only), in the order Take read them: by module, kind, namespace and
	// name.
	Resources []Resource `json:"resources,omitempty"`
	// Secrets are the Secrets that Resources refer to (SecretReferences),
	// taken when the schedule says includeSecrets; the whole snapshot is
	// encrypted.
	Secrets []corev1.Secret `json:"secrets,omitempty"`
}

// RuntimeKyma is what the runtime's owner set on the runtime's own Kyma:
// its spec, and the labels and annotations that are not the operator's.
type RuntimeKyma struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        v1beta2.KymaSpec  `json:"spec"`
}

// Resource is one custom resource: its identity, its labels and
// annotations, and every top-level field but status.
type Resource struct {
	// Module is the module whose CRD the resource is of.
	Module string `json:"module"`
	// Default is true for the module's default custom resource, the one
	// the operator creates from the module's template: a restore may
	// replace it while it is still the operator's untouched copy.
	Default bool                       `json:"default,omitempty"`
	Object  *unstructured.Unstructured `json:"object"`
}

// Encode is the snapshot's bytes, the plaintext of a backup. A snapshot
// larger than MaxSnapshotBytes is refused: no restore could read it.
func (s *Snapshot) Encode() ([]byte, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSnapshotBytes {
		return nil, fmt.Errorf("the snapshot is %d bytes, more than the %d a restore reads", len(data), MaxSnapshotBytes)
	}
	return data, nil
}

// Decode reads a snapshot's bytes, of this format or an older one, into
// the current shape.
func Decode(data []byte) (*Snapshot, error) {
	s := &Snapshot{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("reading the snapshot: %w", err)
	}
	if s.Format < oldestFormat || s.Format > FormatVersion {
		return nil, fmt.Errorf("the snapshot has format %d, this version reads %d to %d: use a newer lmctl", s.Format, oldestFormat, FormatVersion)
	}
	if s.Format == 1 {
		upgradeFormat1(s)
	}
	return s, nil
}

// upgradeFormat1 brings a format 1 snapshot to the current shape: its
// runtime modules are the runtime Kyma's, and each of its resources was a
// module's default custom resource.
func upgradeFormat1(s *Snapshot) {
	if len(s.RuntimeModules) > 0 {
		s.RuntimeKyma = &RuntimeKyma{Spec: v1beta2.KymaSpec{Modules: s.RuntimeModules}}
	}
	s.RuntimeModules = nil
	for i := range s.Resources {
		s.Resources[i].Default = true
	}
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

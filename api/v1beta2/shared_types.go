package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is the coarse state of a Kyma, a module, a Manifest or a Watcher.
// +kubebuilder:validation:Enum=Processing;Deleting;Ready;Error;"";Warning;Unmanaged
type State string

// The states an object can be in. Worst first, as status aggregation ranks
// them: Error, Warning, Processing, Deleting, Ready, Unmanaged.
const (
	StateReady      State = "Ready"
	StateProcessing State = "Processing"
	StateError      State = "Error"
	StateDeleting   State = "Deleting"
	StateWarning    State = "Warning"
	StateUnmanaged  State = "Unmanaged"
)

// CustomResourcePolicy says what happens to a module's default custom
// resource (ModuleTemplate spec.data).
// +kubebuilder:validation:Enum=CreateAndDelete;Ignore
type CustomResourcePolicy string

const (
	// CustomResourcePolicyCreateAndDelete creates the default custom resource
	// when it is absent, never overwrites it, and deletes it when the module
	// is removed.
	CustomResourcePolicyCreateAndDelete CustomResourcePolicy = "CreateAndDelete"

	// CustomResourcePolicyIgnore leaves the module's custom resources entirely
	// to the runtime owner.
	CustomResourcePolicyIgnore CustomResourcePolicy = "Ignore"
)

// LastOperation records the last thing the control loop did to an object.
type LastOperation struct {
	// Operation says what was done, or why it failed.
	Operation string `json:"operation"`

	// LastUpdateTime is when it was done.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
}

// Resource names one Kubernetes object by group, version, kind, namespace and
// name; it is the unit of a Manifest's inventory.
type Resource struct {
	metav1.GroupVersionKind `json:",inline"`

	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ContentResource names one part of a module's content by its link. The names
// used by this operator are "rawManifest", "crds" and "helmChart".
type ContentResource struct {
	// Name is what part of the module the link holds: rawManifest, crds or
	// helmChart.
	Name string `json:"name"`

	// Link is where the content is: oci://host/repo@sha256:…,
	// oci://host/repo:tag, or an http(s) URL (optionally pinned with
	// #sha256=…).
	// +kubebuilder:validation:Format=uri
	Link string `json:"link"`
}

// Content part names that the operator acts on.
const (
	RawManifestResourceName = "rawManifest"
	CRDsResourceName        = "crds"
	HelmChartResourceName   = "helmChart"
)

// TrackingObject points at an object the status of a Kyma refers to, with the
// generation it was seen at.
type TrackingObject struct {
	metav1.TypeMeta `json:",inline"`
	PartialMeta     `json:"metadata,omitempty"`
}

// PartialMeta is the part of ObjectMeta that identifies an object and its
// generation.
type PartialMeta struct {
	// +optional
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace"`
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

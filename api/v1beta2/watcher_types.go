package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Watcher says which changes in runtimes the runtime-watcher reports, and to
// which listener in the control plane.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type Watcher struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WatcherSpec   `json:"spec,omitempty"`
	Status WatcherStatus `json:"status,omitempty"`
}

// WatcherSpec selects the runtime resources to report.
type WatcherSpec struct {
	// ServiceInfo is the listener that receives reports.
	ServiceInfo Service `json:"serviceInfo"`

	// LabelsToWatch selects the objects whose changes are reported.
	// +optional
	LabelsToWatch map[string]string `json:"labelsToWatch,omitempty"`

	// ResourceToWatch is the resource whose changes are reported.
	ResourceToWatch WatchableGVR `json:"resourceToWatch"`

	// Field is the part of the object whose changes are reported.
	Field FieldName `json:"field"`

	// Gateway is the Istio gateway selector of the Kyma API; accepted and
	// ignored.
	// +optional
	Gateway *GatewayConfig `json:"gateway,omitempty"`

	// Manager is accepted for compatibility and ignored.
	// +optional
	Manager string `json:"manager,omitempty"`
}

// WatchableGVR names a resource by group, version and resource.
type WatchableGVR struct {
	// +optional
	Group string `json:"group"`
	// +kubebuilder:validation:MinLength:=1
	Version string `json:"version"`
	// +kubebuilder:validation:MinLength:=1
	Resource string `json:"resource"`
}

// FieldName is the part of an object a Watcher reports changes of.
// +kubebuilder:validation:Enum=spec;status
type FieldName string

// The fields a Watcher can watch.
const (
	SpecField   FieldName = "spec"
	StatusField FieldName = "status"
)

// GatewayConfig selects an Istio gateway; accepted and ignored.
type GatewayConfig struct {
	// +optional
	LabelSelector metav1.LabelSelector `json:"selector"`
}

// Service is a listener's Service in the control plane.
type Service struct {
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=65535
	Port int64 `json:"port"`
	// +kubebuilder:validation:MinLength:=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength:=1
	Namespace string `json:"namespace"`
}

// WatcherStatus is how the Watcher's configuration is doing across runtimes.
type WatcherStatus struct {
	// +optional
	State State `json:"state,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true

// WatcherList is a list of Watchers.
type WatcherList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Watcher `json:"items"`
}

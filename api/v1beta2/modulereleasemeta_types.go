package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ModuleReleaseMeta says, for one module, which version each release channel
// points to, or the one version of a mandatory module.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:singular=modulereleasemeta,path=modulereleasemetas,shortName=mrm
// +kubebuilder:printcolumn:name="Module",type=string,JSONPath=".spec.moduleName"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type ModuleReleaseMeta struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ModuleReleaseMetaSpec `json:"spec,omitempty"`
}

// ModuleReleaseMetaSpec assigns versions to channels.
// +kubebuilder:validation:XValidation:rule="has(self.mandatory) != has(self.channels)",message="exactly one of spec.channels and spec.mandatory must be set"
type ModuleReleaseMetaSpec struct {
	// ModuleName is the module's name.
	// +kubebuilder:validation:Pattern:=`^([a-z]{3,}(-[a-z]{3,})*)?$`
	// +kubebuilder:validation:MaxLength:=64
	ModuleName string `json:"moduleName"`

	// OcmComponentName is the module's OCM component, as the Kyma API has
	// it (for example kyma-project.io/module/template-operator): a domain,
	// then one or more path segments, as the OCM component descriptor
	// schema defines component names. Kymas report it per module
	// (status.modules[].ocmComponentName).
	// +optional
	// +kubebuilder:validation:Pattern:=`^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$`
	// +kubebuilder:validation:MaxLength:=255
	OcmComponentName string `json:"ocmComponentName,omitempty"`

	// Channels maps each channel to a version. Channel names are unique.
	// +optional
	// +listType=map
	// +listMapKey=channel
	// +kubebuilder:validation:MinItems:=1
	Channels []ChannelVersionAssignment `json:"channels,omitempty"`

	// Mandatory is the version of a module installed in every runtime.
	// +optional
	Mandatory *Mandatory `json:"mandatory,omitempty"`

	// Beta, deprecated in the Kyma API: the module is only for beta Kymas.
	// +optional
	Beta bool `json:"beta,omitempty"`

	// Internal, deprecated in the Kyma API: the module is only for internal
	// Kymas.
	// +optional
	Internal bool `json:"internal,omitempty"`

	// KymaSelector is experimental in the Kyma API; accepted and ignored.
	// +optional
	KymaSelector *metav1.LabelSelector `json:"kymaSelector,omitempty"`
}

// Mandatory pins the version of a mandatory module.
type Mandatory struct {
	// Version is a semantic version.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:Pattern:=`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`
	Version string `json:"version"`
}

// ChannelVersionAssignment points one channel at one version.
type ChannelVersionAssignment struct {
	// Channel is the channel's name.
	// +kubebuilder:validation:Pattern:=`^[a-z]+$`
	// +kubebuilder:validation:MinLength:=3
	// +kubebuilder:validation:MaxLength:=32
	Channel string `json:"channel"`

	// Version is a semantic version.
	// +kubebuilder:validation:Pattern:=`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[a-zA-Z-][0-9a-zA-Z-]*)?$`
	// +kubebuilder:validation:MaxLength:=32
	Version string `json:"version"`
}

// +kubebuilder:object:root=true

// ModuleReleaseMetaList is a list of ModuleReleaseMetas.
type ModuleReleaseMetaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ModuleReleaseMeta `json:"items"`
}

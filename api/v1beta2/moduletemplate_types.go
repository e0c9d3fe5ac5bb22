package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	rbacv1 "k8s.io/api/rbac/v1"
)

// ModuleTemplate is one version of a module in the catalog: where its content
// is, its default custom resource, and how to tell it is healthy.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mt
// +kubebuilder:printcolumn:name="Module",type=string,JSONPath=".spec.moduleName"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=".spec.version"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type ModuleTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ModuleTemplateSpec `json:"spec,omitempty"`
}

// ModuleTemplateSpec describes one module version.
type ModuleTemplateSpec struct {
	// Channel is deprecated in the Kyma API; accepted and ignored. Channels
	// are assigned by ModuleReleaseMeta.
	// +optional
	// +kubebuilder:validation:Pattern:=`^$|^[a-z]{3,}$`
	// +kubebuilder:validation:MaxLength:=32
	Channel string `json:"channel,omitempty"`

	// Version is the module version, a semantic version.
	// +optional
	// +kubebuilder:validation:Pattern:=`^((0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[a-zA-Z-][0-9a-zA-Z-]*)?)?$`
	// +kubebuilder:validation:MaxLength:=32
	Version string `json:"version,omitempty"`

	// ModuleName is the module's name.
	// +optional
	// +kubebuilder:validation:Pattern:=`^([a-z]{3,}(-[a-z]{3,})*)?$`
	// +kubebuilder:validation:MaxLength:=64
	ModuleName string `json:"moduleName,omitempty"`

	// Mandatory modules are installed in every runtime without being listed.
	// +optional
	Mandatory bool `json:"mandatory,omitempty"`

	// Data is the module's default custom resource.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:XEmbeddedResource
	// +nullable
	Data *unstructured.Unstructured `json:"data,omitempty"`

	// Descriptor is the OCM component descriptor of the Kyma API; accepted
	// and ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Descriptor runtime.RawExtension `json:"descriptor,omitempty"`

	// CustomStateCheck is deprecated in the Kyma API; accepted and ignored.
	// +optional
	CustomStateCheck []CustomStateCheck `json:"customStateCheck,omitempty"`

	// Resources says where the module's content is: rawManifest, crds,
	// helmChart.
	// +optional
	// +listType=map
	// +listMapKey=name
	Resources []ContentResource `json:"resources,omitempty"`

	// Info links the module's documentation, repository and icons.
	// +optional
	Info *ModuleInfo `json:"info,omitempty"`

	// AssociatedResources lists kinds related to the module; informational.
	// +optional
	AssociatedResources []metav1.GroupVersionKind `json:"associatedResources,omitempty"`

	// Manager is the workload whose readiness tells whether the module is
	// healthy, typically its manager Deployment.
	// +optional
	Manager *Manager `json:"manager,omitempty"`

	// RequiresDowntime upgrades to this version only inside a runtime's
	// maintenance window.
	// +optional
	RequiresDowntime bool `json:"requiresDowntime,omitempty"`

	// Target is where the module is installed: the runtime (default; older
	// versions of the Kyma API wrote it as remote). control-plane is refused
	// at admission for now: installed with the operator's own rights, a
	// module could take over the control plane; it waits for modules to get
	// identities of their own (least privilege).
	// +optional
	// +kubebuilder:default:=runtime
	// +kubebuilder:validation:Enum=runtime;remote;control-plane
	// +kubebuilder:validation:XValidation:rule="self != 'control-plane'",message="target control-plane is not supported yet: the module would run with the operator's rights in the control plane; install the module into the runtime (target: runtime)"
	Target string `json:"target,omitempty"`

	// RuntimeValues lists the Helm values a runtime owner may set for this
	// module in the runtime's own Kyma (spec.modules[].values): top-level
	// keys ("greeting") or dotted paths ("resources.limits"); a key allows
	// everything beneath it. Values the runtime's Kyma sets under any other
	// key are refused: the module shows Error and what is installed stays
	// as it is. Absent or empty, the runtime's Kyma may set no values at
	// all. Values in the control plane's Kyma are not restricted. Allow only
	// keys your chart treats as plain data (never passed to tpl, never
	// naming images, hosts or privileges).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	RuntimeValues []string `json:"runtimeValues,omitempty"`

	// RBAC is the access the module's own operator needs in the runtime; it
	// is granted through a dedicated, least-privilege identity.
	// +optional
	RBAC *ModuleRBAC `json:"rbac,omitempty"`
}

// Targets of a ModuleTemplate.
const (
	TargetRuntime = "runtime"
	// TargetRemote is how older versions of the Kyma API name the runtime.
	TargetRemote = "remote"
	// TargetControlPlane is refused at admission (see ModuleTemplateSpec.Target).
	TargetControlPlane = "control-plane"
)

// ModuleRBAC is the access a module's operator is granted.
type ModuleRBAC struct {
	// ClusterRules are granted cluster-wide.
	// +optional
	ClusterRules []rbacv1.PolicyRule `json:"clusterRules,omitempty"`

	// NamespacedRules are granted in the runtime's sync namespace.
	// +optional
	NamespacedRules []rbacv1.PolicyRule `json:"namespacedRules,omitempty"`
}

// Manager names the workload that tells a module's readiness.
type Manager struct {
	metav1.GroupVersionKind `json:",inline"`

	// Namespace of the manager; the sync namespace when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name of the manager.
	// +kubebuilder:validation:MinLength:=1
	Name string `json:"name"`
}

// ModuleInfo links to what a person needs to know about the module.
type ModuleInfo struct {
	// Repository is the module's source repository.
	Repository string `json:"repository"`

	// Documentation is the module's documentation.
	Documentation string `json:"documentation"`

	// Icons of the module.
	// +optional
	// +listType=map
	// +listMapKey=name
	Icons []ModuleIcon `json:"icons,omitempty"`
}

// ModuleIcon is one icon of a module.
type ModuleIcon struct {
	Name string `json:"name"`
	Link string `json:"link"`
}

// CustomStateCheck is deprecated in the Kyma API; accepted and ignored.
type CustomStateCheck struct {
	JSONPath    string `json:"jsonPath"`
	Value       string `json:"value"`
	MappedState State  `json:"mappedState"`
}

// +kubebuilder:object:root=true

// ModuleTemplateList is a list of ModuleTemplates.
type ModuleTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ModuleTemplate `json:"items"`
}

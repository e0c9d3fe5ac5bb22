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
//
// +kubebuilder:validation:XValidation:rule="!has(self.target) || self.target != 'control-plane' || has(self.rbac)",message="target control-plane needs spec.rbac: the module's operator gets a token with exactly the declared rights; declare the rules it needs (docs/modules.md), or install it into the runtime (target: runtime)"
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

	// RollbackTo lists the earlier versions a runtime at this version may
	// be rolled back to by a ModuleRollout, as semantic-version
	// constraints ("1.2.x", ">=1.1.0 <1.3.0"): those whose data and CRDs
	// this version leaves readable. Absent, this version is never
	// downgraded (SPEC R1).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	RollbackTo []string `json:"rollbackTo,omitempty"`

	// Target is where the module's operator runs: the runtime (default;
	// older versions of the Kyma API wrote it as remote), or the control
	// plane. A control-plane module's content still goes to the runtime
	// (its CRDs, its default custom resource); its operator, deployed in
	// the control plane by the platform, reaches the runtime through a
	// kubeconfig Secret that this operator keeps next to the Manifest,
	// holding the module's own least-privilege token (docs/security.md).
	// It must declare rbac: without it the token would be the runtime's
	// admin.
	// +optional
	// +kubebuilder:default:=runtime
	// +kubebuilder:validation:Enum=runtime;remote;control-plane
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

	// RBAC is the access the module's own operator needs in the runtime.
	// A module that declares it gets an identity of its own in each
	// runtime, a ServiceAccount that holds these rules and the right to
	// write the objects of its content, by name, and its content is
	// applied as that identity: the runtime's API server refuses content
	// that would grant more than was declared. A module that declares none
	// is applied as the operator's --undeclared-module-access says
	// (docs/security.md).
	// +optional
	RBAC *ModuleRBAC `json:"rbac,omitempty"`
}

// Targets of a ModuleTemplate.
const (
	TargetRuntime = "runtime"
	// TargetRemote is how older versions of the Kyma API name the runtime.
	TargetRemote = "remote"
	// TargetControlPlane: the module's operator runs in the control plane
	// (see ModuleTemplateSpec.Target).
	TargetControlPlane = "control-plane"
)

// ModuleRBAC is the access a module's operator is granted. It is also the
// most that the module's content may grant: a ClusterRole or Role in the
// content may hold only rules that these cover.
type ModuleRBAC struct {
	// ClusterRules are granted cluster-wide.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ClusterRules []rbacv1.PolicyRule `json:"clusterRules,omitempty"`

	// NamespacedRules are granted in the runtime's sync namespace.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
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

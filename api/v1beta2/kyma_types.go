package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// No short name: "kyma" is already its singular (kubectl get kyma works),
// and a short name equal to the singular makes the API server refuse the
// names (ShortNamesConflict) when the CRD is applied over one without it,
// such as the Kyma lifecycle-manager's (issue 35).

// Kyma stands for one runtime: the modules it should have and how they are
// doing there. It lives in the control plane; a copy named kyma-system/default
// lives in the runtime.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type Kyma struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec KymaSpec `json:"spec,omitempty"`
	// Status is written by the operator alone, with merge patches, so no
	// field of it needs an owner of its own: atomic, it costs one entry in
	// metadata.managedFields instead of one per field. The control plane's
	// API server holds each entry as a map in its watch cache, about 10 KB
	// per kilobyte of managed fields (docs/performance.md).

	// +structType=atomic
	Status KymaStatus `json:"status,omitempty"`
}

// KymaSpec is the set of modules a runtime should have.
type KymaSpec struct {
	// Channel is the release channel modules resolve through unless a module
	// names its own.
	// +optional
	// +kubebuilder:default:=regular
	// +kubebuilder:validation:Pattern:=`^[a-z]+$`
	// +kubebuilder:validation:MinLength:=3
	// +kubebuilder:validation:MaxLength:=32
	Channel string `json:"channel,omitempty"`

	// SkipMaintenanceWindows lets upgrades that require downtime run at once
	// instead of waiting for the runtime's maintenance window.
	// +optional
	SkipMaintenanceWindows bool `json:"skipMaintenanceWindows,omitempty"`

	// Modules lists the modules to install. Names are unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	Modules []Module `json:"modules,omitempty"`

	// Debug, when set, turns debug mode on or off for every module of this
	// Kyma and wins over each module's own setting.
	// +optional
	Debug *bool `json:"debug,omitempty"`

	// SyncNamespace overrides the operator's sync namespace (kyma-system)
	// for this Kyma's runtime: namespaced module objects that name no
	// namespace, and default custom resources, go there. Load tests use it
	// to let many Kymas share one runtime API server, each in a namespace of
	// its own (SPEC R19).
	// +optional
	// +kubebuilder:validation:Pattern:=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength:=63
	SyncNamespace string `json:"syncNamespace,omitempty"`

	// ApprovedUpgrades are the upgrades the runtime owner approved for
	// modules that upgrade manually (upgrade: Manual): one entry per module,
	// naming exactly the version that may be installed. The runtime's own
	// Kyma is where the owner sets it; the control plane's Kyma counts too,
	// so that an SRE can approve for the owner. It names modules rather
	// than being a field of a module entry so that it works for modules
	// only the control plane's Kyma lists.
	// +optional
	// +listType=map
	// +listMapKey=module
	// +kubebuilder:validation:MaxItems:=64
	ApprovedUpgrades []UpgradeApproval `json:"approvedUpgrades,omitempty"`
}

// UpgradeApproval approves one module's upgrade to one version.
type UpgradeApproval struct {
	// Module is the module's name.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=64
	Module string `json:"module"`
	// Version is the version approved; another version still waits.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=64
	Version string `json:"version"`
}

// UpgradeMode says whether a module's new versions are installed at once or
// wait for the runtime owner.
// +kubebuilder:validation:Enum=Automatic;Manual
type UpgradeMode string

// Upgrade modes.
const (
	// UpgradeAutomatic installs a new version as soon as the other holds
	// (rollout wave, maintenance window) let it.
	UpgradeAutomatic UpgradeMode = "Automatic"
	// UpgradeManual keeps the installed version until the runtime owner
	// approves the new one (spec.approvedUpgrades) or its deadline passes.
	UpgradeManual UpgradeMode = "Manual"
)

// ManualUpgradeStatus is a newer version that waits for the runtime
// owner's approval, and its deadline.
type ManualUpgradeStatus struct {
	// Version is the version waiting. A newer one offered while one waits
	// replaces it and keeps OfferedAt.
	Version string `json:"version"`
	// OfferedAt is when this Kyma first saw a newer version of the module
	// while it upgraded manually.
	OfferedAt metav1.Time `json:"offeredAt"`
	// ForceAt is OfferedAt plus the label group's forceAfter: from then on
	// the version is installed without approval.
	ForceAt metav1.Time `json:"forceAt"`
	// Approved says that spec.approvedUpgrades names this version.
	// +optional
	Approved bool `json:"approved,omitempty"`
	// Forced says that the deadline passed without approval.
	// +optional
	Forced bool `json:"forced,omitempty"`
}

// Module is one module a runtime should have.
type Module struct {
	// Name is the module's name, as in ModuleTemplate spec.moduleName.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=64
	Name string `json:"name"`

	// ControllerName is accepted for compatibility with the Kyma
	// lifecycle-manager API and ignored: one set of controllers reconciles
	// every module. While it is set, the Kyma's FieldsIgnored condition
	// names it.
	// +optional
	ControllerName string `json:"controller,omitempty"`

	// Channel overrides the Kyma's channel for this module.
	// +optional
	// +kubebuilder:validation:Pattern:=`^[a-z]+$`
	// +kubebuilder:validation:MinLength:=3
	// +kubebuilder:validation:MaxLength:=32
	Channel string `json:"channel,omitempty"`

	// RemoteModuleTemplateRef is accepted for compatibility with the Kyma
	// lifecycle-manager API, which deprecated it, and ignored: module
	// templates are read from the control plane only. While it is set, the
	// Kyma's FieldsIgnored condition names it.
	// +optional
	RemoteModuleTemplateRef string `json:"remoteModuleTemplateRef,omitempty"`

	// CustomResourcePolicy says whether the operator creates and deletes the
	// module's default custom resource.
	// +optional
	// +kubebuilder:default:=CreateAndDelete
	CustomResourcePolicy CustomResourcePolicy `json:"customResourcePolicy,omitempty"`

	// Managed false stops all management of the module and leaves its
	// resources in the runtime.
	// +optional
	// +kubebuilder:default:=true
	Managed bool `json:"managed"`

	// Debug turns debug mode on for this module unless the Kyma sets it.
	// +optional
	Debug *bool `json:"debug,omitempty"`

	// Values override, key by key, the values of a module packaged as a
	// Helm chart (the ModuleTemplate's spec.data.spec); ignored for other
	// modules.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Values *runtime.RawExtension `json:"values,omitempty"`

	// Upgrade says whether new versions of the module are installed at
	// once (Automatic) or wait for the runtime owner's approval until a
	// deadline the SREs set (Manual). Empty: the upgrade policy of the
	// Kyma's label group (--upgrade-policies), else Automatic.
	// +optional
	Upgrade UpgradeMode `json:"upgrade,omitempty"`
}

// KymaStatus is what the operator observed of a runtime's modules.
type KymaStatus struct {
	LastOperation `json:"lastOperation,omitempty"`

	// State is the worst state of any module, or of the Kyma itself.
	// +optional
	State State `json:"state,omitempty"`

	// Conditions of the Kyma. The module name is never a condition reason;
	// per-module detail is in modules.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Modules has one entry per module the runtime should have.
	// +optional
	Modules []ModuleStatus `json:"modules,omitempty"`

	// ActiveChannel is the channel the Kyma resolved through.
	// +optional
	ActiveChannel string `json:"activeChannel,omitempty"`

	// ObservedGeneration is the last generation reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// RuntimeModules are the modules the runtime owner lists in the
	// runtime's own Kyma, as last read. While the runtime cannot be read they
	// stand in for it, so that nothing is uninstalled because of an outage;
	// and they restore the runtime's Kyma if it is deleted there.
	// +optional
	RuntimeModules []Module `json:"runtimeModules,omitempty"`

	// Operations are the removals of modules that are gone from the
	// runtime, newest first (at most MaxKymaOperations): their Manifests,
	// which kept their other operations, are gone with them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Operations []Operation `json:"operations,omitempty"`
}

// MaxKymaOperations bounds KymaStatus.Operations.
const MaxKymaOperations = 20

// ModuleStatus is how one module of a Kyma is doing.
type ModuleStatus struct {
	// Name is the module's name.
	Name string `json:"name"`

	// FQDN is accepted for compatibility; this operator sets it to the module
	// name.
	// +optional
	FQDN string `json:"fqdn,omitempty"`

	// Channel the module resolved through.
	// +optional
	Channel string `json:"channel,omitempty"`

	// Version the module resolved to.
	// +optional
	Version string `json:"version,omitempty"`

	// Message says why the module is not Ready; the operator writes at most
	// MaxMessageLength characters.
	// +optional
	Message string `json:"message,omitempty"`

	// State of the module.
	State State `json:"state"`

	// Manifest that installs the module.
	// +optional
	Manifest *TrackingObject `json:"manifest,omitempty"`

	// Resource is the module's default custom resource in the runtime.
	// +optional
	Resource *TrackingObject `json:"resource,omitempty"`

	// Template is the ModuleTemplate the module resolved to.
	// +optional
	Template *TrackingObject `json:"template,omitempty"`

	// Maintenance is true while an upgrade waits for a maintenance window.
	// +optional
	Maintenance bool `json:"maintenance,omitempty"`

	// ManualUpgrade is the newer version offered to a module that upgrades
	// manually, from the moment it is first offered until the installed
	// version reaches it.
	// +optional
	ManualUpgrade *ManualUpgradeStatus `json:"manualUpgrade,omitempty"`

	// OCMComponentName is the module's OCM component (the Kyma API's
	// ModuleReleaseMeta spec.ocmComponentName, else the component its
	// ModuleTemplate's descriptor names), as the Kyma API reports it.
	// +optional
	OCMComponentName string `json:"ocmComponentName,omitempty"`

	// Removal is the module's removal while it is under way (state
	// Deleting); once the module is gone it moves to the Kyma's
	// status.operations.
	// +optional
	Removal *Operation `json:"removal,omitempty"`
}

// +kubebuilder:object:root=true

// KymaList is a list of Kymas.
type KymaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Kyma `json:"items"`
}

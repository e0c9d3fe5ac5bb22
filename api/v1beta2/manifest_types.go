package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Manifest is what to install in one runtime for one module: the content,
// pinned by digest, its values and default custom resource, and the policy.
// The Kyma controller writes it; the Manifest controller carries it out.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mf
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Module",type=string,JSONPath=".spec.moduleName"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=".spec.version"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:storageversion
type Manifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is written by the Kyma controller alone, with one server-side
	// apply of all of it, so it too is owned as one field: a spec another
	// writer changed is replaced whole by the next apply, as declared.

	// +structType=atomic
	Spec ManifestSpec `json:"spec,omitempty"`
	// Status is written by the operator alone, with merge patches, so no
	// field of it needs an owner of its own: atomic, it costs one entry in
	// metadata.managedFields instead of one per field. The control plane's
	// API server holds each entry as a map in its watch cache, about 10 KB
	// per kilobyte of managed fields (docs/performance.md).

	// +structType=atomic
	Status ManifestStatus `json:"status,omitempty"`
}

// ManifestSpec is the desired installation of one module in one runtime.
//
// +kubebuilder:validation:XValidation:rule="!has(self.operatorKubeconfig) || !self.operatorKubeconfig || has(self.rbac)",message="operatorKubeconfig needs rbac: the kubeconfig's token holds exactly the declared rights"
type ManifestSpec struct {
	// Remote is true when the module goes to the runtime, as the Kyma API
	// writes it. false, the control plane, is refused at admission for now:
	// installed with the operator's own rights, a module could take over the
	// control plane. An absent remote means the runtime too.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == true",message="remote: false (install into the control plane) is not supported yet: the module would run with the operator's rights; set remote: true to install the module into the runtime"
	Remote bool `json:"remote"`

	// Version of the module being installed.
	// +optional
	Version string `json:"version,omitempty"`

	// Config is the OCI image spec of the Kyma API; accepted and ignored.
	// +optional
	Config *ImageSpec `json:"config,omitempty"`

	// Install is the OCM install source of the Kyma API; accepted and
	// ignored.
	// +optional
	Install *InstallInfo `json:"install,omitempty"`

	// Resource is the module's default custom resource.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:XEmbeddedResource
	// +nullable
	Resource *unstructured.Unstructured `json:"resource,omitempty"`

	// AssociatedResources is informational: group/version/kind of resources
	// related to the module.
	// +optional
	AssociatedResources []string `json:"associatedResources,omitempty"`

	// LocalizedImages are image references valid where the module is
	// installed (a registry of the landscape's, for example), as the Kyma
	// API has them: a container image of the module's content whose name
	// (the repository's last segment) matches one of them is replaced by
	// it when the content is applied. The Kyma controller fills them from
	// the ModuleTemplate's OCM component descriptor (its image resources).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	LocalizedImages []string `json:"localizedImages,omitempty"`

	// ModuleName is the module this Manifest installs.
	// +optional
	ModuleName string `json:"moduleName,omitempty"`

	// Resources is the module's content, each link pinned by digest.
	// +optional
	// +listType=map
	// +listMapKey=name
	Resources []ContentResource `json:"resources,omitempty"`

	// Values are the Helm values of a chart module.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Values *runtime.RawExtension `json:"values,omitempty"`

	// CustomResourcePolicy says whether the default custom resource is
	// created and deleted.
	// +optional
	// +kubebuilder:default:=CreateAndDelete
	CustomResourcePolicy CustomResourcePolicy `json:"customResourcePolicy,omitempty"`

	// Manager is the workload whose readiness tells the module's health.
	// +optional
	Manager *Manager `json:"manager,omitempty"`

	// Debug puts the debug label on every resource of the module.
	// +optional
	Debug bool `json:"debug,omitempty"`

	// SyncNamespace is the runtime namespace for objects that name none;
	// the operator's default (kyma-system) when empty. Copied from the Kyma.
	// +optional
	SyncNamespace string `json:"syncNamespace,omitempty"`

	// RBAC is what the module's ModuleTemplate declares (spec.rbac),
	// copied by the Kyma controller. The content is applied as an identity
	// of the module's own that holds these rules and the right to write
	// the content's objects, by name. Absent, the operator's
	// --undeclared-module-access decides (docs/security.md).
	// +optional
	RBAC *ModuleRBAC `json:"rbac,omitempty"`

	// OperatorKubeconfig is true for a module whose operator runs in the
	// control plane (ModuleTemplate target: control-plane): a Secret in
	// the Manifest's namespace holds a kubeconfig with the module's own
	// token for the runtime, renewed before it expires. It needs rbac.
	// +optional
	OperatorKubeconfig bool `json:"operatorKubeconfig,omitempty"`
}

// InstallInfo is the OCM install source of the Kyma API.
type InstallInfo struct {
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Source runtime.RawExtension `json:"source,omitempty"`

	// +optional
	Name string `json:"name,omitempty"`
}

// ImageSpec is the OCI image spec of the Kyma API.
type ImageSpec struct {
	// +optional
	Repo string `json:"repo,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Ref string `json:"ref,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=helm-chart;oci-ref;kustomize;""
	Type string `json:"type,omitempty"`
	// +optional
	CredSecretSelector *metav1.LabelSelector `json:"credSecretSelector,omitempty"`
}

// ManifestStatus is what was applied and how it is doing.
type ManifestStatus struct {
	LastOperation `json:"lastOperation,omitempty"`

	// State of the installation.
	// +optional
	State State `json:"state,omitempty"`

	// Conditions of the installation.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Synced is the inventory: every object applied to the runtime. What a
	// new version no longer has is pruned from it.
	// +optional
	// +listType=atomic
	Synced []Resource `json:"synced,omitempty"`

	// DefaultResources are the default custom resources of the module
	// that exist and carry its labels: the current one and, after a new
	// version renamed it, the earlier one until it is deleted. They are the
	// module's: deleted when it is removed, never applied (their spec is
	// the runtime owner's) and never pruned or checked for drift with the
	// objects in Synced.
	// +optional
	// +listType=atomic
	DefaultResources []Resource `json:"defaultResources,omitempty"`

	// TakenOver records the Kyma lifecycle-manager's Manifest whose
	// installed objects this Manifest took over in place (its inventory,
	// its default custom resource and their field ownership), and when.
	// +optional
	TakenOver *TakenOver `json:"takenOver,omitempty"`

	// ObservedGeneration is the last generation applied successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Access is whose rights the module's content is applied with.
	// +optional
	Access *ModuleAccess `json:"access,omitempty"`

	// Operations are the module's last operations in this runtime, newest
	// first (at most MaxManifestOperations). They change only with the
	// state the status reports anyway, so keeping them costs no write.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Operations []Operation `json:"operations,omitempty"`

	// RenderRefusal is the last render of the Manifest's Helm chart that
	// the operator stopped at a limit. It is kept here, not only in the
	// operator's memory, so that a restarted operator does not render the
	// same chart with the same values again: a chart that loops or eats
	// memory would otherwise cost a render per restart and Manifest.
	// Cleared when the content renders.
	// +optional
	RenderRefusal *RenderRefusal `json:"renderRefusal,omitempty"`
}

// RenderRefusalReason is the limit a stopped Helm render went over.
// +kubebuilder:validation:Enum=Deadline;Memory;Output
type RenderRefusalReason string

// Limits a Helm render can be stopped at.
const (
	// RenderRefusalDeadline: the render did not finish within
	// --helm-render-deadline.
	RenderRefusalDeadline RenderRefusalReason = "Deadline"
	// RenderRefusalMemory: the render process needed more than
	// --helm-max-render-memory-bytes.
	RenderRefusalMemory RenderRefusalReason = "Memory"
	// RenderRefusalOutput: the rendered chart is larger than
	// --helm-max-output-bytes.
	RenderRefusalOutput RenderRefusalReason = "Output"
)

// RenderRefusal is a Helm render that was stopped at a limit. The same
// chart with the same values is refused at once, without rendering, until
// the chart, its values or that limit change.
type RenderRefusal struct {
	// Digest identifies the render: sha256 of the chart and of everything
	// it is rendered with (values, release name, namespace, Kubernetes
	// version), as sha256:<hex>.
	Digest string `json:"digest"`

	// Reason is the limit the render went over.
	Reason RenderRefusalReason `json:"reason"`

	// Limit is that limit's value when the render was stopped, such as
	// 10s or 512Mi: raising the limit renders the chart again.
	Limit string `json:"limit"`
}

// MaxManifestOperations bounds ManifestStatus.Operations.
const MaxManifestOperations = 10

// ModuleAccess is how the operator acts for a module in its runtime.
type ModuleAccess struct {
	// Identity is whose rights the content is applied with: the module's
	// ServiceAccount in the runtime, as namespace/name, or "admin", the
	// runtime's kubeconfig, for a module that declares no RBAC while the
	// operator runs with --undeclared-module-access=admin.
	Identity string `json:"identity"`

	// Writes lists the resources (plural.group) of which the identity may
	// write the objects that the module's content names, besides the
	// declared rules: what applying the content needs.
	// +optional
	// +listType=atomic
	Writes []string `json:"writes,omitempty"`

	// Kubeconfig names the Secret, in the Manifest's namespace, that holds
	// the module's token for its operator in the control plane.
	// +optional
	Kubeconfig string `json:"kubeconfig,omitempty"`

	// TokenExpires is when the token in Kubeconfig expires; it is renewed
	// well before.
	// +optional
	TokenExpires *metav1.Time `json:"tokenExpires,omitempty"`
}

// IdentityAdmin is ModuleAccess.Identity of a module applied with the
// runtime's kubeconfig.
const IdentityAdmin = "admin"

// +kubebuilder:object:root=true

// ManifestList is a list of Manifests.
type ManifestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Manifest `json:"items"`
}

// TakenOver names the Kyma lifecycle-manager's Manifest that a Manifest
// took over, and when (docs/migrating-from-klm.md).
type TakenOver struct {
	// Manifest is the KLM Manifest's name, in the same namespace.
	Manifest string `json:"manifest"`
	// Objects is how many of its inventory's objects were taken over.
	Objects int `json:"objects"`
	// Time is when the takeover was recorded.
	Time metav1.Time `json:"time"`
}

package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OperationType says what an operation did to a module in a runtime
// (SPEC G4).
// +kubebuilder:validation:Enum=Install;Upgrade;DriftRepair;Removal;Deletion
type OperationType string

// Operation types.
const (
	// OperationInstall: the module's first version applied to the runtime.
	OperationInstall OperationType = "Install"
	// OperationUpgrade: another version applied (a higher one; a channel
	// moved back rolls back the same way).
	OperationUpgrade OperationType = "Upgrade"
	// OperationDriftRepair: objects someone changed or deleted in the
	// runtime were put back as the module's version has them.
	OperationDriftRepair OperationType = "DriftRepair"
	// OperationRemoval: the module was removed from the Kyma.
	OperationRemoval OperationType = "Removal"
	// OperationDeletion: the runtime's Kyma is being deleted, and every
	// module with it.
	OperationDeletion OperationType = "Deletion"
)

// OperationResult is how an operation stands or ended.
// +kubebuilder:validation:Enum=InProgress;Ready;Error;Failed
type OperationResult string

// Operation results.
const (
	// OperationInProgress: under way, nothing failed so far.
	OperationInProgress OperationResult = "InProgress"
	// OperationReady: done; the module is Ready.
	OperationReady OperationResult = "Ready"
	// OperationError: the last attempt failed and the operator retries by
	// itself (code says why); it may still end Ready.
	OperationError OperationResult = "Error"
	// OperationFailed: the last attempt failed in a way only a change of
	// its inputs can fix (code says why): it needs a human.
	OperationFailed OperationResult = "Failed"
)

// Operation is one install, upgrade, drift repair, removal or deletion of a
// module in a runtime: what was done, between which versions, when, and
// how it ended. The operator keeps the last few per module (Manifest
// status) and the removals of modules no longer there (Kyma status).
type Operation struct {
	// Module is the module's name; set in a Kyma's status only.
	// +optional
	Module string `json:"module,omitempty"`

	Type OperationType `json:"type"`

	// FromVersion is the version installed before (none for an install);
	// ToVersion the one the operation applies (none for a removal).
	// +optional
	FromVersion string `json:"fromVersion,omitempty"`
	// +optional
	ToVersion string `json:"toVersion,omitempty"`

	StartedAt metav1.Time `json:"startedAt"`

	// FinishedAt is when it ended Ready, or was superseded by another
	// operation (its result then says how far it got).
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	Result OperationResult `json:"result"`

	// Code is the reason of the last failure while the result is Error or
	// Failed: a stable word of the Ready condition's reasons
	// (docs/status.md).
	// +optional
	Code string `json:"code,omitempty"`

	// Notes are what the operator did on its own authority during the
	// operation, beyond applying and deleting the module's objects: for
	// example the finalizers it removed from the module's custom
	// resources after their operator was gone. The last few are kept.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=1024
	Notes []string `json:"notes,omitempty"`
}

// MaxOperationNotes is how many notes an operation keeps, the latest.
const MaxOperationNotes = 10

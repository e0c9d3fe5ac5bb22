package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// RuntimeBackup shows the backups of one runtime (SPEC G5): one per Kyma,
// with the Kyma's name, in the Kyma's namespace, created and written by the
// operator for every Kyma a backup schedule (--backup-schedules) selects.
// It outlives its Kyma for the grace period (--backup-grace-period), so
// that a runtime deleted by mistake can be restored (`lmctl backup
// restore`); after that its backups are deleted and it is deleted too. It
// is a kind of its own so that the Kyma API's objects stay as they are.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rbk
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=".status.schedule"
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=".status.lastSuccessfulTime"
// +kubebuilder:printcolumn:name="Count",type=integer,JSONPath=".status.count"
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=".status.lastSize"
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=".status.nextScheduleTime"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=".status.state"
// +kubebuilder:storageversion
type RuntimeBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status RuntimeBackupStatus `json:"status,omitempty"`
}

// RuntimeBackupStatus is what the operator knows of a runtime's backups.
type RuntimeBackupStatus struct {
	// State is Ready while backups succeed, Warning when old backups could
	// not be deleted, Error while backups fail.
	// +optional
	State State `json:"state,omitempty"`

	// Schedule names the backup schedule that selects the Kyma.
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// Repository is the OCI repository the backups are in, one tag per
	// backup: <repository>/<kyma>:<time>.
	// +optional
	Repository string `json:"repository,omitempty"`

	// KeySecret names the Secret (in this namespace) that lists more
	// recipients (public keys) the backups are encrypted to, when the
	// schedule names one. It holds no private key: whoever restores brings
	// the identity (`lmctl backup restore --identity FILE`).
	// +optional
	KeySecret string `json:"keySecret,omitempty"`

	// KeyFingerprints identify the keys the last backup was encrypted to
	// (a hash of each public key); any one of their identities decrypts it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	KeyFingerprints []string `json:"keyFingerprints,omitempty"`

	// LastScheduleTime is when a backup was last attempted;
	// LastSuccessfulTime when one was last stored; NextScheduleTime when the
	// next is due.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// LastBackup is the tag of the last backup stored, LastSize its size in
	// bytes (encrypted).
	// +optional
	LastBackup string `json:"lastBackup,omitempty"`
	// +optional
	LastSize int64 `json:"lastSize,omitempty"`

	// Count is how many backups the repository holds for the runtime.
	// +optional
	Count int32 `json:"count,omitempty"`

	// Backups are the backups held, newest first (at most 64 listed).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Backups []BackupRecord `json:"backups,omitempty"`

	// LastError says why the last attempt failed; empty after a success.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// KymaDeletedAt is when the Kyma was found deleted; DeleteAfter when
	// the grace period ends and the backups and this object are deleted.
	// Both are cleared when a Kyma of the same name comes back.
	// +optional
	KymaDeletedAt *metav1.Time `json:"kymaDeletedAt,omitempty"`
	// +optional
	DeleteAfter *metav1.Time `json:"deleteAfter,omitempty"`

	// ObservedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling (retrying a failed backup) and Stalled,
	// as kstatus reads them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackupRecord is one stored backup.
type BackupRecord struct {
	// Tag is the backup's tag in the repository, its time in UTC.
	Tag string `json:"tag"`
	// Size is its size in bytes, when known (backups this operator stored).
	// +optional
	Size int64 `json:"size,omitempty"`
	// KeyFingerprints identify the keys it was encrypted to, when known
	// (backups this operator stored).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	KeyFingerprints []string `json:"keyFingerprints,omitempty"`
}

// +kubebuilder:object:root=true

// RuntimeBackupList is a list of RuntimeBackups.
type RuntimeBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []RuntimeBackup `json:"items"`
}

// Registered here rather than in groupversion_info.go, so that the kind
// stands in one file.
func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &RuntimeBackup{}, &RuntimeBackupList{})
		return nil
	})
}

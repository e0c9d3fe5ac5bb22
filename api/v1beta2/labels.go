package v1beta2

// Labels and annotations shared by the control plane, the runtimes and the
// module resources. The keys are those of the Kyma lifecycle-manager API so
// that tooling written for it keeps working.
const (
	// KymaNameLabel names the Kyma an object belongs to: a runtime's
	// kubeconfig Secret, a Manifest, a resource applied into a runtime.
	KymaNameLabel = "operator.kyma-project.io/kyma-name"

	// ShardBucketLabel files a Kyma, its Manifests and its kubeconfig Secret
	// under their Kyma's shard bucket (a number from a hash of the Kyma's
	// name), so that each shard of a sharded operator lists and watches
	// its own share of the fleet only. The operator writes it; a value set
	// by hand is put right.
	ShardBucketLabel = "operator.kyma-project.io/shard-bucket"

	// ModuleNameLabel names the module an object belongs to.
	ModuleNameLabel = "operator.kyma-project.io/module-name"

	// ManagedByLabel marks an object as created by this operator; only objects
	// carrying it are ever pruned.
	ManagedByLabel = "operator.kyma-project.io/managed-by"

	// ManagedByValue is the value of ManagedByLabel on everything this operator
	// creates.
	ManagedByValue = "lifecycle-manager"

	// RuntimeIDLabel carries the runtime id of a Kyma; the watcher listener
	// matches it against the subject of the runtime's client certificate.
	RuntimeIDLabel = "kyma-project.io/runtime-id"

	// BetaLabel, set to "true" on a Kyma, lets it receive beta modules; on a
	// ModuleTemplate it marks the module version as beta.
	BetaLabel = "operator.kyma-project.io/beta"

	// InternalLabel, set to "true" on a Kyma, lets it receive internal modules;
	// on a ModuleTemplate it marks the module version as internal.
	InternalLabel = "operator.kyma-project.io/internal"

	// SkipReconciliationLabel, set to "true" on a Kyma, pauses all work on its
	// runtime.
	SkipReconciliationLabel = "operator.kyma-project.io/skip-reconciliation"

	// SyncLabel, set to "false" on a ModuleTemplate, keeps it out of the
	// catalog copied into runtimes.
	SyncLabel = "operator.kyma-project.io/sync"

	// DebugLabel is put on a module's resources when debug mode is on for it,
	// so that module operators raise their log level.
	DebugLabel = "operator.kyma-project.io/debug"

	// WatchedByLabel marks runtime objects whose changes the runtime-watcher
	// reports to the control plane.
	WatchedByLabel = "operator.kyma-project.io/watched-by"

	// CatalogLabel marks the copies of catalog objects in a runtime; only
	// they are ever deleted by the catalog sync.
	CatalogLabel = "operator.kyma-project.io/catalog"

	// OwnedByAnnotation names the Manifest (namespace/name) whose content an
	// object is, so that someone looking at an object in a runtime can find what
	// put it there in the control plane.
	OwnedByAnnotation = "operator.kyma-project.io/owned-by"

	// AdoptAnnotation is the module's half of adopting an object: set to
	// "true" on the object in the module's content, it asks to take the
	// object over when it already exists in the runtime without any module's
	// labels (the runtime owner's). The runtime owner's consent
	// (AdoptableByAnnotation on the live object) is the other half; without
	// both, such an object is an ownership conflict and is never taken over.
	AdoptAnnotation = "operator.kyma-project.io/adopt"

	// AdoptableByAnnotation is the runtime owner's half of adopting an
	// object: set on the live object in the runtime, its value names the one
	// module that may adopt it. Content cannot set it on an existing object,
	// since the module does not write the object before it is adopted.
	AdoptableByAnnotation = "operator.kyma-project.io/adoptable-by"

	// AdoptedAnnotation is the operator's record, written on an object when a
	// module adopted it rather than created it: on removal an adopted object is
	// released (our labels taken off), never deleted. It is the operator's to
	// write, so a module's content cannot set it.
	AdoptedAnnotation = "operator.kyma-project.io/adopted"

	// WatcherFinalizer guards a Kyma until the agent is removed from its runtime and its
	// certificates from the control plane.
	WatcherFinalizer = "operator.kyma-project.io/watcher"

	// WatcherPausedLabel pauses reporting from a Kyma's runtime when set to "true" on
	// the Kyma: the webhook configuration is removed there, and the Kyma is
	// reconciled on the Kyma controller's own schedule only.
	WatcherPausedLabel = "operator.kyma-project.io/watcher-paused"

	// UnmanageAnnotation is set to "true" by the Kyma controller before it
	// deletes a Manifest to say: stop managing the module and leave its resources
	// in the runtime (module managed: false).
	UnmanageAnnotation = "operator.kyma-project.io/unmanage"

	// KymaFinalizer guards a Kyma until its modules are removed from the
	// runtime. On the runtime's own Kyma it keeps the object until the
	// operator has read what the runtime owner listed in it.
	KymaFinalizer = "operator.kyma-project.io/kyma"

	// ManifestFinalizer guards a Manifest until its resources are removed from
	// the runtime.
	ManifestFinalizer = "operator.kyma-project.io/manifest"
)

// DefaultChannel is the channel a module resolves through when neither the
// module nor its Kyma names one.
const DefaultChannel = "regular"

// DefaultRuntimeKymaName and DefaultRuntimeNamespace locate the copy of a Kyma
// that lives in its runtime.
const (
	DefaultRuntimeKymaName  = "default"
	DefaultRuntimeNamespace = "kyma-system"
)

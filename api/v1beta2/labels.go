package v1beta2

// Labels and annotations shared by the control plane, the runtimes and the
// module resources. The keys are those of the Kyma lifecycle-manager API so
// that tooling written for it keeps working.
const (
	// KymaNameLabel names the Kyma an object belongs to: a runtime's
	// kubeconfig Secret, a Manifest, a resource applied into a runtime.
	KymaNameLabel = "operator.kyma-project.io/kyma-name"

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

// Package takeover recognises what the Kyma lifecycle-manager (KLM) left
// in a fleet and moves it to this operator in place: its Manifests'
// inventories, the field ownership of what it applied, its finalizers and
// its runtime agent. Nothing it does recreates an object or changes a
// workload's spec; every write is to metadata.
//
// The facts (names, labels, field managers) are KLM's, from its source at
// release 1.20.4 and main at c5b83f1b5; docs/migrating-from-klm.md lists
// them with the file each comes from.
package takeover

import (
	"fmt"
	"hash/fnv"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// KLM's finalizers (api/shared/cr_finalizer.go, internal/manifest/finalizer).
const (
	// ManifestFinalizer guards a KLM Manifest until it pruned its objects.
	ManifestFinalizer = "declarative.kyma-project.io/finalizer"
	// LabelRemovalFinalizer guards a KLM Manifest while an unmanaged
	// module's labels are taken off.
	LabelRemovalFinalizer = "label-removal-finalizer"
	// DefaultCRFinalizer guards a KLM Manifest until its default custom
	// resource is gone.
	DefaultCRFinalizer = "resource.kyma-project.io/finalizer"
	// KymaFinalizer is KLM's on a control plane's Kyma (capital K; this
	// operator's is v1beta2.KymaFinalizer).
	KymaFinalizer = "operator.kyma-project.io/Kyma"
	// PurgeFinalizer is on every Kyma under KLM 1.20.x.
	PurgeFinalizer = "operator.kyma-project.io/purge-finalizer"
	// MandatoryModuleFinalizer is on a mandatory ModuleReleaseMeta.
	MandatoryModuleFinalizer = "operator.kyma-project.io/mandatory-module"
)

// ManifestFinalizers are every finalizer KLM puts on a Manifest.
var ManifestFinalizers = []string{ManifestFinalizer, LabelRemovalFinalizer, DefaultCRFinalizer}

// KymaFinalizers are KLM's finalizers on a control plane's Kyma.
var KymaFinalizers = []string{KymaFinalizer, PurgeFinalizer}

// KLM's marks on what it applies to a runtime
// (internal/service/manifest/render/default_transforms.go).
const (
	// ManagedByValue is KLM's value of v1beta2.ManagedByLabel on runtime
	// objects ("lifecycle-manager" is this operator's).
	ManagedByValue = "kyma"
	// OwnedByAnnotation names the KLM Manifest ("namespace/name") an
	// object belongs to; DeprecatedOwnedByAnnotation is its name since
	// KLM 1.21 (87a1ebac).
	OwnedByAnnotation           = v1beta2.OwnedByAnnotation
	DeprecatedOwnedByAnnotation = "deprecated-operator.kyma-project.io/owned-by"
)

// KLM's field managers (internal/common/fieldowners/const.go).
const (
	// ApplierManager applies module objects (server-side apply).
	ApplierManager = "declarative.kyma-project.io/applier"
	// DefaultCRManager created the default custom resource (Update).
	DefaultCRManager = "resource.kyma-project.io/finalizer"
	// SyncContextManager writes the runtime's Kyma's labels and the
	// kyma-system Namespace.
	SyncContextManager = "kyma-sync-context"
	// CatalogManager writes the runtime's catalog; KLM tells its own
	// catalog objects by this manager alone.
	CatalogManager = "catalog-sync"
	// StatusManager writes the runtime Kyma's Deleting status.
	StatusManager = "operator.kyma-project.io/lifecycle-manager"
	// UserAgentManager is the default manager of KLM's writes without an
	// owner (its binary is /manager): the runtime Kyma's creation and
	// status. A module's own operator may have the same name, so it is
	// moved only on the runtime's Kyma.
	UserAgentManager = "manager"
)

// IsKLMManifest tells a Manifest that KLM made and reconciled: it carries
// KLM's Manifest finalizer, which this operator never sets. KLM adds it at
// its first reconcile, so a Manifest without it has installed nothing.
func IsKLMManifest(m *v1beta2.Manifest) bool {
	return slices.ContainsFunc(ManifestFinalizers, func(f string) bool { return slices.Contains(m.Finalizers, f) })
}

// AppliedBy tells whether KLM applied an object for the Manifest
// "namespace/name": it carries KLM's managed-by value and names the
// Manifest in its owned-by annotation (either spelling). Content alone
// never makes an object the module's.
func AppliedBy(live *metav1.ObjectMeta, manifest string) bool {
	if manifest == "" || live.Labels[v1beta2.ManagedByLabel] != ManagedByValue {
		return false
	}
	return live.Annotations[DeprecatedOwnedByAnnotation] == manifest || live.Annotations[OwnedByAnnotation] == manifest
}

// ManifestName is the name KLM gives a module's Manifest
// (pkg/module/common/module.go): the Kyma, the module, and an fnv32 hash
// of the module's OCM component (kyma-project.io/module/<module>, KLM's
// default) and the module. Fixtures and fleet-bench write KLM's state
// under it; the takeover itself never relies on a name.
func ManifestName(kyma, module string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte("kyma-project.io/module/" + module + module))
	return fmt.Sprintf("%s-%s-%d", kyma, module, h.Sum32())
}

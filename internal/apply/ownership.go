package apply

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// Owner is one module of one Kyma: whose objects a Manifest writes and
// deletes. An object is the module's when it carries all three ownership
// labels that internal/content/transform puts on the module's content with
// the module's values.
type Owner struct {
	Kyma   string
	Module string
	// Manifest is "namespace/name" of the Manifest, as in the owned-by
	// annotation. An object that was released by this Manifest (module set
	// to managed: false) carries it and is taken back when the module is
	// managed again.
	Manifest string
	// SyncNamespace is the runtime's sync namespace: a module never writes
	// it and never deletes it, even when it ships it.
	SyncNamespace string
	// Predecessor is "namespace/name" of the Kyma lifecycle-manager's
	// Manifest whose objects this module took over (status.takenOver): an
	// object that KLM marked as applied for it is the module's too, until
	// the module's first apply puts this operator's labels on it.
	Predecessor string
}

// Owns says whether an object with these labels is the module's.
func (o Owner) Owns(labels map[string]string) bool {
	return labels[v1beta2.ManagedByLabel] == v1beta2.ManagedByValue &&
		labels[v1beta2.KymaNameLabel] == o.Kyma &&
		labels[v1beta2.ModuleNameLabel] == o.Module
}

// Claim is what a module may do with one object of its content.
type Claim string

const (
	// ClaimCreate means: the object does not exist; the module creates it and it
	// is the module's.
	ClaimCreate Claim = "Create"
	// ClaimOwned means: the object is the module's already.
	ClaimOwned Claim = "Owned"
	// ClaimAdopt means: the object is the runtime owner's, the runtime owner
	// consents (AdoptableByAnnotation names the module) and the module's
	// content asks for it (AdoptAnnotation); it becomes the module's, and is
	// released, not deleted, when the module goes.
	ClaimAdopt Claim = "Adopt"
	// ClaimUseAsIs means: a Namespace that exists and that the module did not
	// create (the sync namespace always): the module neither writes nor
	// deletes it, and it is not one of the module's own namespaces.
	ClaimUseAsIs Claim = "UseAsIs"
	// ClaimConflict means: the object exists and is someone else's; the module
	// must not take it over.
	ClaimConflict Claim = "Conflict"
)

// ClaimFor decides what the module described by owner may do with desired,
// one object of its content, given the live object's metadata (nil when it
// does not exist). For a conflict it also says whose the object is.
func ClaimFor(desired Object, live *metav1.ObjectMeta, owner Owner) (Claim, string) {
	isNamespace := desired.Group == "" && desired.Kind == "Namespace"
	if isNamespace && desired.Name == owner.SyncNamespace {
		return ClaimUseAsIs, ""
	}
	if live == nil {
		return ClaimCreate, ""
	}
	if owner.Owns(live.Labels) || takeover.AppliedBy(live, owner.Predecessor) {
		return ClaimOwned, ""
	}
	if live.Labels[v1beta2.ManagedByLabel] == v1beta2.ManagedByValue {
		// Another module's, or the operator's own (runtime CRDs, the watcher).
		if isNamespace {
			return ClaimUseAsIs, ""
		}
		return ClaimConflict, holderOf(live.Labels, owner)
	}
	// Not managed by this operator: the runtime owner's, or another tool's.
	if live.Annotations[v1beta2.OwnedByAnnotation] == owner.Manifest && owner.Manifest != "" {
		return ClaimOwned, "" // released by this very Manifest, now managed again
	}
	if isNamespace {
		// Never adopted: a Namespace is the module's only when the module
		// created it, since owning one lets the module write into it.
		return ClaimUseAsIs, ""
	}
	consent := live.Annotations[v1beta2.AdoptableByAnnotation] == owner.Module && owner.Module != ""
	switch {
	case desired.Adopt && consent:
		return ClaimAdopt, ""
	case desired.Adopt:
		return ClaimConflict, fmt.Sprintf("the runtime owner's; the module asks to adopt it, and the runtime owner has not consented with %s: %s on it",
			v1beta2.AdoptableByAnnotation, owner.Module)
	}
	return ClaimConflict, "not created by lifecycle-manager"
}

func holderOf(labels map[string]string, owner Owner) string {
	module, kyma := labels[v1beta2.ModuleNameLabel], labels[v1beta2.KymaNameLabel]
	switch {
	case module == "":
		return "lifecycle-manager's own, not a module's"
	case kyma == owner.Kyma:
		return fmt.Sprintf("module %s's", module)
	default:
		return fmt.Sprintf("module %s's of Kyma %s", module, kyma)
	}
}

// Object is what ownership decisions need to know of one object of a
// module's content.
type Object struct {
	Group, Kind, Namespace, Name string
	// Adopt: the content allows adopting the object (AdoptAnnotation).
	Adopt bool
}

// Disposal is what happens to an object of a module's inventory when the
// module no longer has it (prune) or is removed.
type Disposal string

const (
	// DisposeGone means: the object does not exist any more.
	DisposeGone Disposal = "Gone"
	// DisposeDelete means: the module created the object; it is deleted.
	DisposeDelete Disposal = "Delete"
	// DisposeRelease means: the object is the module's but was adopted, or is a
	// namespace that must stay: our labels are taken off and it stays.
	DisposeRelease Disposal = "Release"
	// DisposeLeave means: the object is not the module's (any more); it is left
	// as it is.
	DisposeLeave Disposal = "Leave"
)

// systemNamespaces are never deleted by a module, whatever their labels say.
var systemNamespaces = map[string]bool{
	v1beta2.DefaultRuntimeNamespace: true, // the runtime's Kyma lives there
	"default":                       true,
	"kube-system":                   true,
	"kube-public":                   true,
	"kube-node-lease":               true,
}

// DisposalFor decides what removing r from the module described by owner
// does, given the live object's metadata (nil when it does not exist). A
// Namespace that the module created may still be in use by other modules;
// that is the caller's to check before it deletes one.
func DisposalFor(r v1beta2.Resource, live *metav1.ObjectMeta, owner Owner) Disposal {
	if live == nil {
		return DisposeGone
	}
	if !owner.Owns(live.Labels) && !takeover.AppliedBy(live, owner.Predecessor) {
		return DisposeLeave
	}
	if isNamespace(r) && (r.Name == owner.SyncNamespace || systemNamespaces[r.Name]) {
		return DisposeRelease
	}
	if live.Annotations[v1beta2.AdoptedAnnotation] == "true" {
		return DisposeRelease
	}
	return DisposeDelete
}

func isNamespace(r v1beta2.Resource) bool {
	return r.Group == "" && r.Kind == "Namespace"
}

// Conflict is one object a module ships that exists and is not its own.
type Conflict struct {
	// Object names it: "Kind namespace/name", or "Kind name" when it is
	// cluster-scoped.
	Object string
	// Holder says whose it is.
	Holder string
}

// ConflictError says that a module's content names objects that it may not
// write: they exist and are someone else's, or no module may write them
// (Plan.Refuse). Nothing of the module was applied, and its identity was
// granted nothing for them.
type ConflictError struct {
	Conflicts []Conflict
}

// maxConflictsNamed keeps the message (and the Manifest's condition)
// bounded; the Manifest's event names the same.
const maxConflictsNamed = 10

func (e *ConflictError) Error() string {
	conflicts := append([]Conflict(nil), e.Conflicts...)
	sort.Slice(conflicts, func(i, j int) bool { return conflicts[i].Object < conflicts[j].Object })
	named := make([]string, 0, maxConflictsNamed)
	for i, c := range conflicts {
		if i == maxConflictsNamed {
			named = append(named, fmt.Sprintf("and %d more", len(conflicts)-i))
			break
		}
		named = append(named, fmt.Sprintf("%s (%s)", c.Object, c.Holder))
	}
	return fmt.Sprintf("%d objects of the module are not its own to write: %s. Nothing was applied, and nothing was granted for them. "+
		"Rename or remove each in the runtime or in the module; a runtime owner's object is adopted only with %s: \"true\" on it in the module's content "+
		"and %s: <module> on it in the runtime",
		len(conflicts), strings.Join(named, ", "), v1beta2.AdoptAnnotation, v1beta2.AdoptableByAnnotation)
}

// describe names an object for people: "Kind namespace/name", or
// "Kind name" when it is cluster-scoped.
func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

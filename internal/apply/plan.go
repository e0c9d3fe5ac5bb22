package apply

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Plan is what a module may do with each object of its content, decided on
// the live objects before anything of the module is written — its
// identity's grant included. A module's rights come from what it provably
// owns, never from what its content names: the grant is derived from
// Writable and OwnNamespaces, so an object that a failed check refuses is
// never granted.
type Plan struct {
	Owner   Owner
	Objects []*unstructured.Unstructured
	// Claims say, for each of Objects, what the module may do with it.
	Claims []Claim
	// Holders say, for each conflicting object, whose it is.
	Holders []string
	// Refused are objects no module may write, whoever holds them
	// (Refuse): they count as conflicts.
	Refused []Conflict
	// refused marks, for each of Objects, whether Refuse refused it.
	refused []bool
	// NewContent says that the objects are content the runtime has not
	// been brought to yet (an install or an upgrade), not a drift
	// correction of what was applied: the module's own objects are then
	// applied at once, without first reading and dry-running each to find
	// what changed (ApplyPlan).
	NewContent bool
	// inventory is what the module applied before.
	inventory []v1beta2.Resource
}

// PlanModule decides what the module may do with each object of its
// content. inventory is what the module applied before (Manifest
// status.synced); those objects are the module's and are not looked up
// again, so a steady module costs no extra request. Every other object, and
// every Namespace (few, and shared between modules), is looked up once
// (metadata only, through reader) and claimed as ClaimFor decides.
func PlanModule(ctx context.Context, reader client.Reader, objects []*unstructured.Unstructured, owner Owner, inventory []v1beta2.Resource) (*Plan, error) {
	known := make(map[string]bool, len(inventory))
	for _, r := range inventory {
		known[key(r)] = true
	}
	plan := &Plan{
		Owner: owner, Objects: objects, inventory: inventory,
		Claims: make([]Claim, len(objects)), Holders: make([]string, len(objects)), refused: make([]bool, len(objects)),
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookupConcurrency)
	for i, obj := range objects {
		desired := objectOf(obj)
		if known[key(resourceOf(obj))] && !isNamespace(resourceOf(obj)) {
			plan.Claims[i] = ClaimOwned
			continue
		}
		if desired.Group == "" && desired.Kind == "Namespace" && desired.Name == owner.SyncNamespace {
			plan.Claims[i] = ClaimUseAsIs // no need to look: never written
			continue
		}
		g.Go(func() error {
			live, err := lookup(gctx, reader, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
			if err != nil {
				return err
			}
			plan.Claims[i], plan.Holders[i] = ClaimFor(desired, live, owner)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return plan, nil
}

// lookup reads an object's metadata; nil when it does not exist (also when
// its kind is not served yet: a CRD applied in the same batch).
func lookup(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, namespace, name string) (*metav1.ObjectMeta, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", describe(gvk.Kind, namespace, name), err)
	}
	return &live.ObjectMeta, nil
}

// Conflicts names the objects the module may not write: someone else's,
// and those Refuse refused.
func (p *Plan) Conflicts() []Conflict {
	var conflicts []Conflict
	for i, obj := range p.Objects {
		if p.Claims[i] == ClaimConflict {
			conflicts = append(conflicts, Conflict{Object: describe(obj.GetKind(), obj.GetNamespace(), obj.GetName()), Holder: p.Holders[i]})
		}
	}
	return append(conflicts, p.Refused...)
}

// Writable are the objects the module writes: those it creates, owns or
// adopts. Namespaces it uses as they are, conflicts and refused objects are
// not among them.
func (p *Plan) Writable() []*unstructured.Unstructured {
	writable := make([]*unstructured.Unstructured, 0, len(p.Objects))
	for i, obj := range p.Objects {
		if p.refused[i] {
			continue
		}
		switch p.Claims[i] {
		case ClaimCreate, ClaimOwned, ClaimAdopt:
			writable = append(writable, obj)
		case ClaimUseAsIs, ClaimConflict:
		}
	}
	return writable
}

// OwnNamespaces are the namespaces the module may write into: the sync
// namespace, and the Namespaces that it creates now or created before (in
// its content, or still in its inventory until they are pruned). A system
// namespace (kube-*, default, kyma-system) is never the module's, whatever
// its labels say, and neither is one that Refuse reserves.
func (p *Plan) OwnNamespaces(reserved []string) []string {
	own := []string{p.Owner.SyncNamespace}
	add := func(name string) {
		if !systemNamespaces[name] && !slices.Contains(reserved, name) && !slices.Contains(own, name) {
			own = append(own, name)
		}
	}
	for i, obj := range p.Objects {
		if isNamespace(resourceOf(obj)) && (p.Claims[i] == ClaimCreate || p.Claims[i] == ClaimOwned) {
			add(obj.GetName())
		}
	}
	for _, r := range p.inventory {
		if isNamespace(r) {
			add(r.Name)
		}
	}
	slices.Sort(own[1:])
	return own
}

// Limits are what no module may write, whoever holds the object: the
// operator's own surroundings in the runtime.
type Limits struct {
	// OwnNamespacesOnly refuses namespaced objects outside the module's own
	// namespaces (OwnNamespaces): for modules that declare RBAC, whose
	// identity holds no write anywhere else.
	OwnNamespacesOnly bool
	// ReservedNamespaces hold the operator's identities: no module object
	// goes into them.
	ReservedNamespaces []string
	// ReservedServiceAccount tells whether a Pod in namespace may not run
	// as the ServiceAccount name: it is an identity of the operator's (the
	// watcher agent's, a module identity's).
	ReservedServiceAccount func(namespace, name string) bool
}

// OperatorCRDs are the CRDs of the operator's own kinds (config/crd): in
// a runtime they are the operator's, never a module's, even where absent.
// Only these: real modules define kinds in the same API group
// (samples.operator.kyma-project.io, kedas.operator.kyma-project.io).
var OperatorCRDs = []string{
	"kymas.operator.kyma-project.io",
	"manifests.operator.kyma-project.io",
	"modulereleasemetas.operator.kyma-project.io",
	"modulerollouts.operator.kyma-project.io",
	"moduletemplates.operator.kyma-project.io",
	"runtimebackups.operator.kyma-project.io",
	"watchers.operator.kyma-project.io",
}

// Refuse adds to Refused the objects of the content that limits forbid,
// with the reason in place of a holder.
func (p *Plan) Refuse(limits Limits) {
	own := p.OwnNamespaces(limits.ReservedNamespaces)
	for i, obj := range p.Objects {
		if p.Claims[i] == ClaimConflict {
			continue // named already
		}
		if why := refusal(obj, own, limits); why != "" {
			p.refused[i] = true
			p.Refused = append(p.Refused, Conflict{Object: describe(obj.GetKind(), obj.GetNamespace(), obj.GetName()), Holder: why})
		}
	}
}

func refusal(obj *unstructured.Unstructured, own []string, limits Limits) string {
	gvk := obj.GroupVersionKind()
	namespace := obj.GetNamespace()
	switch {
	case gvk.GroupKind() == crdKind && slices.Contains(OperatorCRDs, obj.GetName()):
		return "a CRD of lifecycle-manager's own API"
	case gvk.Group == "" && gvk.Kind == "Namespace" && slices.Contains(limits.ReservedNamespaces, obj.GetName()):
		return "the namespace of lifecycle-manager's identities"
	case namespace != "" && slices.Contains(limits.ReservedNamespaces, namespace):
		return "in the namespace of lifecycle-manager's identities"
	case namespace != "" && limits.OwnNamespacesOnly && !slices.Contains(own, namespace):
		return "in namespace " + namespace + ", which the module did not create"
	}
	if limits.ReservedServiceAccount != nil {
		if account := serviceAccountOf(obj); account != "" && limits.ReservedServiceAccount(namespace, account) {
			return "its Pods would run as ServiceAccount " + account + ", an identity of lifecycle-manager's"
		}
	}
	return ""
}

var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// podSpecPaths are where the workload kinds of Kubernetes keep their Pod
// spec.
var podSpecPaths = map[schema.GroupKind][]string{
	{Kind: "Pod"}:                        {"spec"},
	{Kind: "ReplicationController"}:      {"spec", "template", "spec"},
	{Group: "apps", Kind: "Deployment"}:  {"spec", "template", "spec"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec", "template", "spec"},
	{Group: "apps", Kind: "DaemonSet"}:   {"spec", "template", "spec"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec", "template", "spec"},
	{Group: "batch", Kind: "Job"}:        {"spec", "template", "spec"},
	{Group: "batch", Kind: "CronJob"}:    {"spec", "jobTemplate", "spec", "template", "spec"},
	{Kind: "PodTemplate"}:                {"template", "spec"},
}

// serviceAccountOf is the ServiceAccount a workload's Pods run as, when it
// names one; "" for any other kind.
func serviceAccountOf(obj *unstructured.Unstructured) string {
	path := podSpecPaths[obj.GroupVersionKind().GroupKind()]
	if path == nil {
		return ""
	}
	spec, _, _ := unstructured.NestedMap(obj.Object, path...)
	if name, _ := spec["serviceAccountName"].(string); name != "" {
		return name
	}
	name, _ := spec["serviceAccount"].(string) // the deprecated spelling, still honoured
	return name
}

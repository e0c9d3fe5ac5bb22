package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// OwnershipFieldManager writes the operator's ownership records (the
// adopted annotation, releasing an object): kept apart from FieldManager so
// that applying a module's content never removes them.
const OwnershipFieldManager = "lifecycle-manager-ownership"

// lookupConcurrency bounds the parallel existence checks of a first apply.
const lookupConcurrency = 4

// ModuleResult is what one ApplyModule did.
type ModuleResult struct {
	Result
	// Adopted names the objects the module adopted in this apply.
	Adopted []string
	// UsedAsIs names the Namespaces the module ships that exist and are not
	// its own: used, neither written nor deleted.
	UsedAsIs []string
	// NewKinds are the kinds whose CRDs this apply created; they are
	// Established when it returns. The API server holds the first create
	// of an object of such a kind (see remote.Cluster.CreateHeld).
	NewKinds []schema.GroupKind
}

// ApplyModule applies a module's content, guarded by ownership: it plans
// (PlanModule, reading through the applier's client) and applies the plan.
func (a *Applier) ApplyModule(ctx context.Context, objects []*unstructured.Unstructured, owner Owner, inventory []v1beta2.Resource) (ModuleResult, error) {
	plan, err := PlanModule(ctx, a.client, objects, owner, inventory)
	if err != nil {
		return ModuleResult{}, err
	}
	return a.ApplyPlan(ctx, plan)
}

// ApplyPlan applies a module's content as plan decided. When the plan has
// conflicts or refusals, nothing is applied and a *ConflictError names the
// objects: a module version goes in whole or not at all, as with content
// that fails to render, and what is installed stays as it is.
func (a *Applier) ApplyPlan(ctx context.Context, plan *Plan) (ModuleResult, error) {
	if conflicts := plan.Conflicts(); len(conflicts) > 0 {
		return ModuleResult{}, &ConflictError{Conflicts: conflicts}
	}
	var result ModuleResult
	toApply := make([]*unstructured.Unstructured, 0, len(plan.Objects))
	var toAdopt, staged, fresh []*unstructured.Unstructured
	for i, obj := range plan.Objects {
		switch plan.Claims[i] {
		case ClaimUseAsIs:
			result.UsedAsIs = append(result.UsedAsIs, describe(obj.GetKind(), "", obj.GetName()))
		case ClaimAdopt:
			toAdopt = append(toAdopt, obj)
			toApply = append(toApply, obj)
			staged = append(staged, obj)
		case ClaimCreate:
			toApply = append(toApply, obj)
			if kind, ok := definedKind(obj); ok {
				result.NewKinds = append(result.NewKinds, kind)
			}
			if createdDirectly(obj) {
				fresh = append(fresh, obj)
			} else {
				staged = append(staged, obj)
			}
		default:
			toApply = append(toApply, obj)
			if plan.NewContent && createdDirectly(obj) {
				fresh = append(fresh, obj)
			} else {
				staged = append(staged, obj)
			}
		}
	}
	// The record goes first: should the apply fail after it, the object is
	// still the runtime owner's (no labels of ours) and is adopted again.
	for _, obj := range toAdopt {
		if err := a.markAdopted(ctx, obj); err != nil {
			return ModuleResult{}, err
		}
		result.Adopted = append(result.Adopted, describe(obj.GetKind(), obj.GetNamespace(), obj.GetName()))
	}
	if len(staged) > 0 {
		applied, err := a.Apply(ctx, staged)
		if err != nil {
			return ModuleResult{}, err
		}
		result.Changed = applied.Changed
	}
	if a.AfterStaged != nil {
		if err := a.AfterStaged(ctx); err != nil {
			return ModuleResult{}, err
		}
	}
	if err := a.create(ctx, fresh); err != nil {
		return ModuleResult{}, err
	}
	result.Changed += len(fresh)
	result.Inventory = InventoryOf(toApply)
	return result, nil
}

// definedKind is the kind a CRD defines; ok is false for any other object.
func definedKind(obj *unstructured.Unstructured) (schema.GroupKind, bool) {
	if !ssautils.IsCRD(obj) {
		return schema.GroupKind{}, false
	}
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}, kind != ""
}

// createdDirectly tells whether an object that the ownership lookup found
// absent, or one of the module's own objects in new content, is written with
// a single apply request rather than through the staged apply. The staged
// apply reads each object again and dry-runs it to find what would change,
// which for an object that does not exist is all of it: on a first install
// that tripled the requests to the runtime. In an upgrade it cost a read and
// a dry-run per object on top of the apply of each that changed; an apply of
// an unchanged object costs the API server what its dry-run did, and writes
// nothing. Only a drift correction of applied content keeps the diff, which
// writes (and counts) just what drifted. Cluster definitions (CRDs,
// Namespaces, ClusterRoles) and classes stay staged, as other objects need
// them established before they can be applied.
func createdDirectly(obj *unstructured.Unstructured) bool {
	return !ssautils.IsClusterDefinition(obj) && !ssautils.IsClassDefinition(obj)
}

// create server-side applies objects that do not exist yet, and the
// module's own objects of new content, after the staged ones, so that
// anything they need is established. Should one have been created meanwhile
// by someone else, the apply still takes it over, as the staged apply would;
// the window is the few milliseconds since the lookup.
func (a *Applier) create(ctx context.Context, objects []*unstructured.Unstructured) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookupConcurrency)
	for _, obj := range objects {
		g.Go(func() error {
			applied := obj.DeepCopy()
			err := a.client.Apply(gctx, client.ApplyConfigurationFromUnstructured(applied), client.ForceOwnership, client.FieldOwner(a.fieldManager))
			if err != nil {
				return fmt.Errorf("creating %s: %w", describe(obj.GetKind(), obj.GetNamespace(), obj.GetName()), err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (a *Applier) markAdopted(ctx context.Context, obj *unstructured.Unstructured) error {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	live.SetNamespace(obj.GetNamespace())
	live.SetName(obj.GetName())
	patch := client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, v1beta2.AdoptedAnnotation))
	if err := a.client.Patch(ctx, live, patch, client.FieldOwner(OwnershipFieldManager)); err != nil {
		return fmt.Errorf("adopting %s: %w", describe(obj.GetKind(), obj.GetNamespace(), obj.GetName()), err)
	}
	return nil
}

// NamespaceUse says whether other modules of the runtime still use a
// Namespace that a module created and is about to delete.
type NamespaceUse int

const (
	// NamespaceFree means: no other module has objects in it; it is deleted.
	NamespaceFree NamespaceUse = iota
	// NamespaceInUse means: a module that stays has objects in it; it is released
	// and left to them.
	NamespaceInUse
	// NamespaceInUseByLeaving means: only modules that are being removed too have
	// objects in it; it is deleted once they are gone.
	NamespaceInUseByLeaving
)

// RemoveOptions guard what removing a module's objects may do.
type RemoveOptions struct {
	Owner Owner
	// NamespaceUse tells whether other modules use a Namespace. Nil means no
	// other module does.
	NamespaceUse func(ctx context.Context, name string) (NamespaceUse, error)
}

// Removal is what removing objects did.
type Removal struct {
	// Kept are still there and stay in the inventory: deleting failed, a
	// Namespace waits for other modules to leave it, or a CRD for its
	// custom resources to go.
	Kept []v1beta2.Resource
	// Waiting names the Namespaces kept for other modules.
	Waiting []string
	// Released names objects that stay without our labels: adopted ones,
	// system namespaces, namespaces other modules still use.
	Released []string
	// Left names objects of the inventory that are not the module's (any
	// more); they were not touched.
	Left []string
	// Blocked names the module's CRDs kept (in Kept) because custom
	// resources of them exist: deleting a CRD would make the API server
	// delete them all, a user's too.
	Blocked []string
}

// PruneModule removes, guarded like RemoveModule, the objects of the old
// inventory that are not in the current one.
func (a *Applier) PruneModule(ctx context.Context, old, current []v1beta2.Resource, opts RemoveOptions) (Removal, error) {
	keep := map[string]bool{}
	for _, r := range current {
		keep[key(r)] = true
	}
	var stale []v1beta2.Resource
	for _, r := range old {
		if !keep[key(r)] {
			stale = append(stale, r)
		}
	}
	// A Namespace the new version no longer ships, but still puts objects
	// in, stays for them.
	otherUse := opts.NamespaceUse
	opts.NamespaceUse = func(ctx context.Context, name string) (NamespaceUse, error) {
		for _, r := range current {
			if r.Namespace == name {
				return NamespaceInUse, nil
			}
		}
		if otherUse == nil {
			return NamespaceFree, nil
		}
		return otherUse(ctx, name)
	}
	return a.RemoveModule(ctx, stale, opts)
}

// RemoveModule removes a module's objects from the runtime, each as
// DisposalFor decides on the live object: only what the module created is
// deleted; adopted objects are released; what is not the module's is left.
// Namespaces go last, and only when no other module uses them; a CRD only
// when no custom resource of it is left. What fails or waits stays in
// Removal.Kept for the next attempt.
func (a *Applier) RemoveModule(ctx context.Context, resources []v1beta2.Resource, opts RemoveOptions) (Removal, error) {
	var removal Removal
	var errs []error
	for _, r := range removalOrder(resources) {
		if err := a.remove(ctx, r, opts, &removal); err != nil {
			removal.Kept = append(removal.Kept, r)
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return removal, fmt.Errorf("removing %d of %d objects failed, first: %w", len(errs), len(resources), errs[0])
	}
	return removal, nil
}

func (a *Applier) remove(ctx context.Context, r v1beta2.Resource, opts RemoveOptions, removal *Removal) error {
	gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	name := describe(r.Kind, r.Namespace, r.Name)
	live, err := lookup(ctx, a.client, gvk, r.Namespace, r.Name)
	if err != nil {
		return err
	}
	switch DisposalFor(r, live, opts.Owner) {
	case DisposeGone:
		return nil
	case DisposeLeave:
		removal.Left = append(removal.Left, name)
		return nil
	case DisposeRelease:
		removal.Released = append(removal.Released, name)
		return a.release(ctx, gvk, live, true)
	}
	if isNamespace(r) && opts.NamespaceUse != nil {
		use, err := opts.NamespaceUse(ctx, r.Name)
		if err != nil {
			return err
		}
		switch use {
		case NamespaceInUse:
			removal.Released = append(removal.Released, name)
			return a.release(ctx, gvk, live, true)
		case NamespaceInUseByLeaving:
			removal.Kept = append(removal.Kept, r)
			removal.Waiting = append(removal.Waiting, r.Name)
			return nil
		}
	}
	if isCRD(r) {
		// Any custom resource of it, the module's or not, would be deleted
		// with it: the owner does not matter here.
		left, err := CustomResourcesOf(ctx, a.client, []v1beta2.Resource{r}, Owner{})
		if err != nil {
			return err
		}
		if len(left.Own)+len(left.Others) > 0 {
			removal.Kept = append(removal.Kept, r)
			removal.Blocked = append(removal.Blocked, name)
			return nil
		}
	}
	err = deleteExactly(ctx, a.client, gvk, *live, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

// removalOrder is the safe order to remove a module's objects in:
//  1. instances of the module's own CRDs, so that the module's operator,
//     still running, can finalize them;
//  2. the rest in reverse apply order (workloads before the RBAC they use);
//  3. Namespaces, judged when the module's own objects in them are gone;
//  4. CRDs last: deleting a CRD deletes every instance of it, so it goes
//     only once nothing else of the module needs it.
//
// The default custom resource is not in the inventory; the Manifest
// controller deletes it before any of these.
func removalOrder(resources []v1beta2.Resource) []v1beta2.Resource {
	groups := crdGroups(resources)
	var instances, rest, namespaces, crds []v1beta2.Resource
	for _, r := range slices.Backward(resources) {
		switch {
		case isCRD(r):
			crds = append(crds, r)
		case isNamespace(r):
			namespaces = append(namespaces, r)
		case groups[r.Group]:
			instances = append(instances, r)
		default:
			rest = append(rest, r)
		}
	}
	ordered := make([]v1beta2.Resource, 0, len(resources))
	ordered = append(ordered, instances...)
	ordered = append(ordered, rest...)
	ordered = append(ordered, namespaces...)
	return append(ordered, crds...)
}

// crdGroups are the API groups that the CRDs among resources define; a CRD's
// name is <plural>.<group>.
func crdGroups(resources []v1beta2.Resource) map[string]bool {
	groups := map[string]bool{}
	for _, r := range resources {
		if _, group, ok := strings.Cut(r.Name, "."); ok && isCRD(r) {
			groups[group] = true
		}
	}
	return groups
}

func isCRD(r v1beta2.Resource) bool {
	return r.Group == "apiextensions.k8s.io" && r.Kind == "CustomResourceDefinition"
}

// ReleaseModule takes our labels off those of a module's objects that are
// its own, and leaves them in the runtime (module managed: false). They keep
// the owned-by annotation, so that managing the module again takes them
// back.
func (a *Applier) ReleaseModule(ctx context.Context, resources []v1beta2.Resource, owner Owner) error {
	for _, r := range resources {
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		live, err := lookup(ctx, a.client, gvk, r.Namespace, r.Name)
		if err != nil {
			return err
		}
		if live == nil || !owner.Owns(live.Labels) {
			continue
		}
		if err := a.release(ctx, gvk, live, false); err != nil {
			return err
		}
	}
	return nil
}

// release takes our labels off an object. forget also removes the records
// that lead back to the module (owned-by, adopted), for an object that goes
// back to the runtime owner for good.
func (a *Applier) release(ctx context.Context, gvk schema.GroupVersionKind, live *metav1.ObjectMeta, forget bool) error {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(live.Namespace)
	obj.SetName(live.Name)
	labels := map[string]any{v1beta2.ManagedByLabel: nil, v1beta2.KymaNameLabel: nil, v1beta2.ModuleNameLabel: nil}
	metadata := map[string]any{"labels": labels}
	if forget {
		metadata["annotations"] = map[string]any{v1beta2.OwnedByAnnotation: nil, v1beta2.AdoptedAnnotation: nil}
	}
	body, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		return fmt.Errorf("releasing %s: %w", describe(gvk.Kind, live.Namespace, live.Name), err)
	}
	if err := a.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(OwnershipFieldManager)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing %s: %w", describe(gvk.Kind, live.Namespace, live.Name), err)
	}
	return nil
}

func objectOf(obj *unstructured.Unstructured) Object {
	gvk := obj.GroupVersionKind()
	return Object{
		Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Adopt: obj.GetAnnotations()[v1beta2.AdoptAnnotation] == "true",
	}
}

func resourceOf(obj *unstructured.Unstructured) v1beta2.Resource {
	gvk := obj.GroupVersionKind()
	return v1beta2.Resource{
		GroupVersionKind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Name:             obj.GetName(), Namespace: obj.GetNamespace(),
	}
}

// deleteExactly deletes the object live describes, of kind gvk. The UID
// precondition makes sure that the object deleted is the one whose labels
// were checked, not one created under its name since. It deletes through
// an unstructured object: the API server answers a delete that a finalizer
// holds up with the object itself, which controller-runtime's typed path
// (a PartialObjectMetadata goes there) cannot decode for a kind outside the
// scheme, and a delete that took effect would be reported as failed.
func deleteExactly(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, live metav1.ObjectMeta, opts ...client.DeleteOption) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(live.Namespace)
	obj.SetName(live.Name)
	uid := live.UID
	return c.Delete(ctx, obj, append([]client.DeleteOption{client.Preconditions{UID: &uid}}, opts...)...)
}

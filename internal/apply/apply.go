// Package apply puts a module's rendered objects into a runtime with
// server-side apply, keeps the inventory of what it applied, prunes what a new
// version no longer has, and tells whether the module is ready.
//
// The heavy lifting — dry-run diff so unchanged objects are not written,
// staged apply with CRDs and Namespaces first — is fluxcd/pkg/ssa's; this
// package adds the inventory and the ownership guard around it: a module
// writes and deletes only what is its own (ownership.go, module.go).
package apply

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// FieldManager is the one field manager under which the operator applies
// module resources into runtimes.
const FieldManager = "lifecycle-manager"

// Result is what one Apply did.
type Result struct {
	// Inventory lists every object that is now applied.
	Inventory []v1beta2.Resource
	// Changed counts objects created or updated; zero means nothing drifted.
	// Objects of new content written without a diff (Plan.NewContent)
	// count as updated.
	Changed int
}

// Applier applies to one runtime.
type Applier struct {
	// AfterStaged, when set, runs in ApplyModule after the staged objects
	// (CRDs, Namespaces, what exists already) and before the objects it
	// creates directly: a module identity's writes in a Namespace that its
	// content creates can only be granted once the Namespace exists.
	AfterStaged func(context.Context) error

	manager      *ssa.ResourceManager
	client       client.Client
	fieldManager string
}

// NewApplier returns an Applier for the runtime reached through c, applying
// under FieldManager.
func NewApplier(c client.Client, mapper meta.RESTMapper) *Applier {
	return NewApplierAs(c, mapper, FieldManager)
}

// NewApplierAs returns an Applier that applies under its own field manager,
// for writers (such as the catalog sync) whose fields must not be confused
// with the module resources'.
func NewApplierAs(c client.Client, mapper meta.RESTMapper, fieldManager string) *Applier {
	poller := polling.NewStatusPoller(c, mapper, polling.Options{})
	manager := ssa.NewResourceManager(c, poller, ssa.Owner{Field: fieldManager, Group: "operator.kyma-project.io"})
	manager.SetConcurrency(4)
	return &Applier{manager: manager, client: c, fieldManager: fieldManager}
}

// Apply server-side applies objects: CRDs, ClusterRoles and Namespaces first
// (waiting until they are established), then the rest. Objects that did not
// drift are not written. It takes over whatever exists under the objects'
// names, so it is for the operator's own objects; a module's content goes
// through ApplyModule, which never takes over what is not the module's.
func (a *Applier) Apply(ctx context.Context, objects []*unstructured.Unstructured) (Result, error) {
	opts := ssa.DefaultApplyOptions()
	opts.WaitInterval = 200 * time.Millisecond
	opts.WaitTimeout = 30 * time.Second
	changes, err := a.manager.ApplyAllStaged(ctx, objects, opts)
	if err != nil {
		return Result{}, err
	}
	result := Result{Inventory: InventoryOf(objects)}
	for _, entry := range changes.Entries {
		if entry.Action == ssa.CreatedAction || entry.Action == ssa.ConfiguredAction {
			result.Changed++
		}
	}
	return result, nil
}

// Delete deletes the given objects that carry this operator's managed-by
// label and returns those that failed. It is for the operator's own objects
// in a runtime (the watcher agent); a module's objects are removed with
// RemoveModule, which checks the module's own labels.
func (a *Applier) Delete(ctx context.Context, resources []v1beta2.Resource) ([]v1beta2.Resource, error) {
	if len(resources) == 0 {
		return nil, nil
	}
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue}
	var failed []v1beta2.Resource
	var firstErr error
	for _, r := range resources {
		if _, err := a.manager.Delete(ctx, toUnstructured(r), opts); err != nil {
			if meta.IsNoMatchError(err) {
				continue // its CRD is gone, and with it the object
			}
			failed = append(failed, r)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if firstErr != nil {
		return failed, fmt.Errorf("deleting %d of %d objects failed, first: %w", len(failed), len(resources), firstErr)
	}
	return nil, nil
}

// InventoryOf lists objects as inventory entries, in apply order.
func InventoryOf(objects []*unstructured.Unstructured) []v1beta2.Resource {
	inventory := make([]v1beta2.Resource, 0, len(objects))
	for _, o := range objects {
		gvk := o.GroupVersionKind()
		inventory = append(inventory, v1beta2.Resource{
			GroupVersionKind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Name:             o.GetName(),
			Namespace:        o.GetNamespace(),
		})
	}
	return inventory
}

// key identifies an object across API versions of its kind, so that moving a
// resource to a new version is not mistaken for dropping it.
func key(r v1beta2.Resource) string {
	return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

func toUnstructured(r v1beta2.Resource) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
	u.SetName(r.Name)
	u.SetNamespace(r.Namespace)
	return u
}

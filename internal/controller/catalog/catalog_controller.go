// Package catalog copies the module catalog — every active ModuleTemplate
// and ModuleReleaseMeta of the control plane — into each runtime, write-only,
// so that tools in the runtime can discover modules (SPEC R8).
//
// It runs in its own control loop, apart from installation, and can be
// switched off. A catalog change is applied to each runtime once: only the
// objects whose control-plane revision changed are written, and a full
// dry-run pass that overwrites edits made in the runtime runs at most once
// per resync interval.
package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/pause"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// FieldManager owns the catalog copies in runtimes.
const FieldManager = "lifecycle-manager-catalog"

// Reconciler syncs the catalog into the runtime of one Kyma per request.
type Reconciler struct {
	client.Client
	Runtimes remote.Runtimes
	// ControlPlane is the KCP's config; a runtime at the same address is the
	// control plane itself (single-cluster mode) and gets no copy.
	ControlPlane *rest.Config
	// Namespace holds the catalog in the control plane.
	Namespace string
	// SyncNamespace is where copies go in runtimes unless a Kyma names its
	// own.
	SyncNamespace string
	// Resync bounds how long an edit made in a runtime survives.
	Resync time.Duration
	// Pause tells Kymas whose runtimes must not be touched.
	Pause pause.Policy
	// ReconcileTimeout bounds one reconcile; zero means none.
	ReconcileTimeout time.Duration

	// events reports failed syncs on the Kyma; set up by SetupWithManager.
	events *reconciler.Events
}

// runtimeState is the catalog sync's memo of a runtime (see remote.Recall):
// what was last written to it. It is replaced, never changed in place.
type runtimeState struct {
	// revisions maps an object key to the control-plane resourceVersion
	// last applied.
	revisions map[string]string
	fullSync  time.Time
}

// Reasons of the catalog sync's outcomes. The catalog sync has no status of
// its own and writes none to the Kyma, whose status the Kyma controller owns:
// its outcomes drive requeueing, and failures become Warning events on the
// Kyma with the raw error (at most once a minute per Kyma and reason).
const (
	// ReasonSynced: the runtime's catalog copy is in step; looked at again
	// after the resync interval.
	ReasonSynced = "CatalogSynced"
	// ReasonSingleCluster: the runtime is the control plane itself, which
	// holds the catalog already.
	ReasonSingleCluster = "CatalogSingleCluster"
	// ReasonRuntimeUnavailable: no client for the runtime (no or a refused
	// kubeconfig Secret, or it cannot be reached); retried with backoff.
	ReasonRuntimeUnavailable = "CatalogRuntimeUnavailable"
	// ReasonSyncFailed: reading the catalog or writing it to the runtime
	// failed; retried with backoff.
	ReasonSyncFailed = "CatalogSyncFailed"
)

// controllerName names the catalog sync in metrics and runtime slots.
const controllerName = "catalog"

// Reconcile brings one runtime's catalog copy in step, on the one reconcile
// skeleton: the runtime slot and the deadline; nothing for a Kyma being
// deleted (the catalog has no finalizer: the copies go with the runtime) or
// paused; else the sync.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kyma := &v1beta2.Kyma{}
	if err := r.Get(ctx, req.NamespacedName, kyma); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return reconciler.Run(ctx, r.Client, kyma, reconciler.Phases[*v1beta2.Kyma]{
		Controller: controllerName,
		Gate: func(_ context.Context, kyma *v1beta2.Kyma) (func(), time.Duration) {
			return remote.Gate(r.Runtimes, controllerName, kyma.Name, kyma.Name, nil)
		},
		Deadline:  r.ReconcileTimeout,
		Paused:    r.Pause.Paused,
		Reconcile: r.reconcile,
		// No status: see the reasons above.
		Record: func(*v1beta2.Kyma, reconciler.Outcome) {},
		Status: func(*v1beta2.Kyma) any { return nil },
		Events: r.events,
	})
}

// reconcile writes what changed in the catalog to the Kyma's runtime.
func (r *Reconciler) reconcile(ctx context.Context, kyma *v1beta2.Kyma) reconciler.Outcome {
	cluster, err := r.Runtimes.Get(ctx, kyma.Name)
	if err != nil {
		return reconciler.Retry(ReasonRuntimeUnavailable, "The runtime cannot be used ("+reconciler.Cause(err)+")", err)
	}
	if sameCluster(cluster.Config, r.ControlPlane) {
		return reconciler.Ready(ReasonSingleCluster, "The runtime is the control plane, which holds the catalog", 0)
	}
	desired, err := r.desired(ctx, kyma)
	if err != nil {
		return reconciler.Retry(ReasonSyncFailed, "Reading the catalog failed ("+reconciler.Cause(err)+")", err)
	}
	if err := r.sync(ctx, cluster, desired, r.namespace(kyma)); err != nil {
		r.Runtimes.EvictOnError(kyma.Name, err)
		return reconciler.Retry(ReasonSyncFailed, "Writing the catalog to the runtime failed ("+reconciler.Cause(err)+")", err)
	}
	return reconciler.Ready(ReasonSynced, "The runtime's catalog copy is in step", r.Resync)
}

func (r *Reconciler) namespace(kyma *v1beta2.Kyma) string {
	if kyma.Spec.SyncNamespace != "" {
		return kyma.Spec.SyncNamespace
	}
	return r.SyncNamespace
}

// source is one catalog object and the revision it had in the control plane.
type source struct {
	key      string
	revision string
	object   *unstructured.Unstructured
}

// desired lists the catalog objects the Kyma's runtime may see: beta and
// internal ones only when the Kyma is labelled for them, no template
// labelled operator.kyma-project.io/sync=false, and none that targets the
// control plane.
func (r *Reconciler) desired(ctx context.Context, kyma *v1beta2.Kyma) ([]source, error) {
	visible := func(labels map[string]string, restriction resolve.Restriction) bool {
		return restriction.VisibleTo(kyma.Labels) && !strings.EqualFold(labels[v1beta2.SyncLabel], "false")
	}

	metas := &v1beta2.ModuleReleaseMetaList{}
	if err := r.List(ctx, metas, client.InNamespace(r.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ModuleReleaseMetas: %w", err)
	}
	hidden := map[string]bool{} // modules whose release meta is not visible
	var out []source
	for i := range metas.Items {
		m := &metas.Items[i]
		if !visible(m.Labels, resolve.RestrictionOf(m.Labels, m)) {
			hidden[m.Spec.ModuleName] = true
			continue
		}
		obj, err := copyOf(m, "ModuleReleaseMeta", &m.Spec)
		if err != nil {
			return nil, err
		}
		out = append(out, source{key: "ModuleReleaseMeta/" + m.Name, revision: m.ResourceVersion, object: obj})
	}
	templates := &v1beta2.ModuleTemplateList{}
	if err := r.List(ctx, templates, client.InNamespace(r.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ModuleTemplates: %w", err)
	}
	for i := range templates.Items {
		t := &templates.Items[i]
		if hidden[t.Spec.ModuleName] || !visible(t.Labels, resolve.RestrictionOf(t.Labels, nil)) {
			continue
		}
		if t.Spec.Target == v1beta2.TargetControlPlane && t.Spec.RBAC == nil {
			// Stored before admission refused it; the runtime's API server,
			// with the same CRD, would refuse the copy and with it the
			// whole sync. Nothing can install it anyway.
			continue
		}
		obj, err := copyOf(t, "ModuleTemplate", &t.Spec)
		if err != nil {
			return nil, err
		}
		out = append(out, source{key: "ModuleTemplate/" + t.Name, revision: t.ResourceVersion, object: obj})
	}
	return out, nil
}

// copyOf is the runtime's copy of a catalog object: its labels and spec,
// without credentials (see stripCredentials).
func copyOf(obj client.Object, kind string, spec any) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", kind, obj.GetName(), err)
	}
	dropNulls(content)
	stripCredentials(content)
	u := &unstructured.Unstructured{Object: map[string]any{"spec": content}}
	u.SetAPIVersion(v1beta2.GroupVersion.String())
	u.SetKind(kind)
	u.SetName(obj.GetName())
	labels := map[string]string{}
	for k, v := range obj.GetLabels() {
		labels[k] = v
	}
	labels[v1beta2.ManagedByLabel] = v1beta2.ManagedByValue
	labels[v1beta2.CatalogLabel] = "true"
	u.SetLabels(labels)
	return u, nil
}

// dropNulls removes null fields, which typed encoding produces for empty
// raw fields (spec.descriptor) and which server-side apply, unlike create,
// refuses for non-nullable schema fields.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		}
	}
}

// sync writes what changed since the last time (everything, with a dry-run
// diff, once per resync interval) and deletes copies no longer in the
// catalog.
func (r *Reconciler) sync(ctx context.Context, cluster *remote.Cluster, desired []source, namespace string) error {
	state, _ := remote.Recall[runtimeState](cluster)
	full := time.Since(state.fullSync) >= r.Resync

	var toApply []*unstructured.Unstructured
	wanted := make(map[string]bool, len(desired))
	for _, s := range desired {
		wanted[s.key] = true
		s.object.SetNamespace(namespace)
		if full || state.revisions[s.key] != s.revision {
			toApply = append(toApply, s.object)
		}
	}
	if len(toApply) > 0 {
		if err := remote.EnsureNamespace(ctx, cluster.Client, namespace); err != nil {
			return err
		}
		if _, err := cluster.ApplierAs(FieldManager).Apply(ctx, toApply); err != nil {
			return fmt.Errorf("applying the catalog: %w", err)
		}
	}
	if err := r.prune(ctx, cluster.Client, namespace, wanted, state, full); err != nil {
		return err
	}

	revisions := make(map[string]string, len(desired))
	for _, s := range desired {
		revisions[s.key] = s.revision
	}
	state.revisions = revisions
	if full {
		state.fullSync = time.Now()
	}
	remote.Remember(cluster, state)
	return nil
}

// prune deletes catalog copies the control plane no longer has. Between full
// passes only copies known to have been written are considered, so that an
// unchanged catalog costs no request.
func (r *Reconciler) prune(ctx context.Context, c client.Client, namespace string, wanted map[string]bool, state runtimeState, full bool) error {
	if !full {
		stale := false
		for key := range state.revisions {
			if !wanted[key] {
				stale = true
			}
		}
		if !stale {
			return nil
		}
	}
	for _, kind := range []string{"ModuleTemplate", "ModuleReleaseMeta"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: v1beta2.GroupVersion.Group, Version: v1beta2.GroupVersion.Version, Kind: kind + "List"})
		if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{v1beta2.CatalogLabel: "true", v1beta2.ManagedByLabel: v1beta2.ManagedByValue}); err != nil {
			return fmt.Errorf("listing the runtime's catalog: %w", err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			if wanted[kind+"/"+item.GetName()] {
				continue
			}
			if err := c.Delete(ctx, item); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting %s %s from the runtime: %w", kind, item.GetName(), err)
			}
		}
	}
	return nil
}

func sameCluster(a, b *rest.Config) bool {
	return a != nil && b != nil && strings.TrimSuffix(a.Host, "/") == strings.TrimSuffix(b.Host, "/")
}

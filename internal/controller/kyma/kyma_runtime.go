package kyma

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// RuntimeCRDs are the CRDs every runtime gets from the control plane, so
// that its owner can edit the runtime's Kyma and discover the catalog there
// (SPEC R7).
var RuntimeCRDs = []string{
	"kymas.operator.kyma-project.io",
	"moduletemplates.operator.kyma-project.io",
	"modulereleasemetas.operator.kyma-project.io",
}

// runtimeSide is what the Kyma controller keeps in step in a runtime: the
// CRDs it needs and the runtime's own Kyma.
type runtimeSide struct {
	kcp client.Reader
}

func newRuntimeSide(kcp client.Reader) *runtimeSide {
	return &runtimeSide{kcp: kcp}
}

// appliedCRDs is the Kyma controller's memo of a runtime: the control-plane
// CRD revisions last applied to it; equal revisions mean no request at all.
type appliedCRDs string

// syncCRDs applies the control plane's versions of RuntimeCRDs to the
// runtime when they changed since the last time.
func (s *runtimeSide) syncCRDs(ctx context.Context, cluster *remote.Cluster) error {
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(RuntimeCRDs))
	revisions := make([]string, 0, len(RuntimeCRDs))
	for _, name := range RuntimeCRDs {
		// Read only; the CRDs are large, and this runs on every reconcile.
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := s.kcp.Get(ctx, client.ObjectKey{Name: name}, crd, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("reading CRD %s in the control plane: %w", name, err)
		}
		revisions = append(revisions, crd.Name+"@"+crd.ResourceVersion)
		crds = append(crds, crd)
	}
	revision := appliedCRDs(strings.Join(revisions, ","))
	if applied, _ := remote.Recall[appliedCRDs](cluster); applied == revision {
		return nil
	}

	objects := make([]*unstructured.Unstructured, 0, len(crds))
	for _, crd := range crds {
		obj, err := RuntimeCRD(ctx, cluster.Client, crd)
		if err != nil {
			return err
		}
		objects = append(objects, obj)
	}
	if _, err := cluster.Applier().Apply(ctx, objects); err != nil {
		// A CRD stalled on names its earlier spec asked for, which the
		// API server never re-checks (an earlier release's short name
		// over KLM's CRD): cleared, the apply goes through.
		repaired, repairErr := apply.RepairStaleNamesAccepted(ctx, cluster.Client, RuntimeCRDs...)
		if repairErr != nil || !repaired {
			return fmt.Errorf("applying CRDs to the runtime: %w", errors.Join(err, repairErr))
		}
		if _, err := cluster.Applier().Apply(ctx, objects); err != nil {
			return fmt.Errorf("applying CRDs to the runtime: %w", err)
		}
	}
	remote.Remember(cluster, revision)
	return nil
}

// keepStoredVersions is crd with the versions that the runtime's copy has
// objects stored at and crd no longer lists put back as the runtime has
// them (unserved, as the Kyma lifecycle-manager leaves its v1beta1), none
// of them the storage version: the API server refuses a CRD that drops a
// version still in status.storedVersions, and a runtime taken over from
// the Kyma lifecycle-manager may have one (issue 35). Only read when the
// control plane's CRDs changed since the last apply.
func keepStoredVersions(ctx context.Context, c client.Reader, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	live := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return crd, nil
		}
		return nil, fmt.Errorf("reading CRD %s in the runtime: %w", crd.Name, err)
	}
	dropped := apply.DroppedStoredVersions(crd, live)
	if len(dropped) == 0 {
		return crd, nil
	}
	return apply.BridgeCRD(crd, live, dropped), nil
}

// RuntimeCRD is what is applied to a runtime, read through c, for a
// control-plane CRD: its copy (runtimeCRD), with the versions the runtime
// still has objects stored at kept (keepStoredVersions).
func RuntimeCRD(ctx context.Context, c client.Reader, crd *apiextensionsv1.CustomResourceDefinition) (*unstructured.Unstructured, error) {
	kept, err := keepStoredVersions(ctx, c, crd)
	if err != nil {
		return nil, err
	}
	return runtimeCRD(kept)
}

// runtimeCRD is the runtime's copy of a control-plane CRD: its spec, and our
// labels, nothing the control plane's API server filled in.
func runtimeCRD(crd *apiextensionsv1.CustomResourceDefinition) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding CRD %s: %w", crd.Name, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	obj.SetKind("CustomResourceDefinition")
	obj.SetName(crd.Name)
	obj.SetLabels(map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue})
	return obj, nil
}

// runtimeKymaKey locates the runtime's own Kyma.
func runtimeKymaKey(kyma *v1beta2.Kyma, syncNamespace string) client.ObjectKey {
	ns := kyma.Spec.SyncNamespace
	if ns == "" {
		ns = syncNamespace
	}
	return client.ObjectKey{Namespace: ns, Name: v1beta2.DefaultRuntimeKymaName}
}

// RuntimeKymaLabels are the labels of a runtime's own Kyma: ours, and
// watched by the default Watcher, whose agent reports its changes.
func RuntimeKymaLabels() map[string]string {
	return map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue,
		v1beta2.WatchedByLabel: "kyma",
	}
}

// syncRuntimeKyma makes sure the runtime has its own Kyma and returns it.
// A missing one is created, holding the modules the runtime owner had listed
// (as last recorded in the control plane); a runtime that lost its Kyma may
// have lost the rest too, so every memo of it is dropped. One being deleted
// by the runtime owner is let go — after its module list was read — and
// comes back on the next reconcile.
func syncRuntimeKyma(ctx context.Context, cluster *remote.Cluster, kyma *v1beta2.Kyma, key client.ObjectKey) (*v1beta2.Kyma, bool, error) {
	c := cluster.Client
	runtimeKyma, err := readRuntimeKyma(ctx, cluster, key)
	switch {
	case apierrors.IsNotFound(err):
		if err := remote.EnsureNamespace(ctx, c, key.Namespace); err != nil {
			return nil, false, err
		}
		runtimeKyma = &v1beta2.Kyma{
			ObjectMeta: metav1.ObjectMeta{
				Name: key.Name, Namespace: key.Namespace,
				Labels:     RuntimeKymaLabels(),
				Finalizers: []string{v1beta2.KymaFinalizer},
			},
			Spec: v1beta2.KymaSpec{Channel: kyma.Spec.Channel, Modules: kyma.Status.RuntimeModules},
		}
		if err := c.Create(ctx, runtimeKyma); err != nil {
			return nil, false, fmt.Errorf("creating the runtime's Kyma %s: %w", key, err)
		}
		cluster.Forget()
		rememberRuntimeKyma(cluster, runtimeKyma)
		return runtimeKyma, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading the runtime's Kyma %s: %w", key, err)
	}

	if !runtimeKyma.DeletionTimestamp.IsZero() {
		if kyma.DeletionTimestamp.IsZero() {
			// The runtime owner deleted it: let it go and recreate it.
			patch := finalizerPatch(runtimeKyma)
			controllerutil.RemoveFinalizer(runtimeKyma, v1beta2.KymaFinalizer)
			if err := c.Patch(ctx, runtimeKyma, patch); err != nil && !apierrors.IsNotFound(err) {
				return nil, false, fmt.Errorf("releasing the runtime's deleted Kyma %s: %w", key, err)
			}
			return runtimeKyma, true, nil
		}
		return runtimeKyma, false, nil
	}
	if !controllerutil.ContainsFinalizer(runtimeKyma, v1beta2.KymaFinalizer) {
		patch := finalizerPatch(runtimeKyma)
		controllerutil.AddFinalizer(runtimeKyma, v1beta2.KymaFinalizer)
		if err := c.Patch(ctx, runtimeKyma, patch); err != nil {
			return nil, false, fmt.Errorf("protecting the runtime's Kyma %s: %w", key, err)
		}
		rememberRuntimeKyma(cluster, runtimeKyma)
	}
	return runtimeKyma, false, nil
}

// seenRuntimeKyma is the Kyma controller's memo of a runtime: its own Kyma
// as the operator last read or wrote it. A Kyma's status mirror and module
// history make it the largest object the periodic look reads in a runtime,
// and it rarely changes between looks; reading it whole was 8% of the idle
// operator's CPU at 1,000 runtimes (docs/performance.md), and as much
// encoding for the runtime's API server.
type seenRuntimeKyma struct{ kyma *v1beta2.Kyma }

// readRuntimeKyma reads the runtime's own Kyma. When the operator has seen
// it, only its metadata is read: the same resourceVersion is the same
// object, so the copy remembered stands in for it; another one is read
// whole. A NotFound is returned as it is.
func readRuntimeKyma(ctx context.Context, cluster *remote.Cluster, key client.ObjectKey) (*v1beta2.Kyma, error) {
	if seen, ok := remote.Recall[seenRuntimeKyma](cluster); ok && client.ObjectKeyFromObject(seen.kyma) == key {
		current := &metav1.PartialObjectMetadata{}
		current.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("Kyma"))
		if err := cluster.Client.Get(ctx, key, current); err != nil {
			return nil, err
		}
		if current.ResourceVersion == seen.kyma.ResourceVersion {
			return seen.kyma.DeepCopy(), nil
		}
	}
	runtimeKyma := &v1beta2.Kyma{}
	if err := cluster.Client.Get(ctx, key, runtimeKyma); err != nil {
		return nil, err
	}
	rememberRuntimeKyma(cluster, runtimeKyma)
	return runtimeKyma, nil
}

// rememberRuntimeKyma keeps a copy of the runtime's Kyma as the API server
// returned it from a read or a write, for readRuntimeKyma.
func rememberRuntimeKyma(cluster *remote.Cluster, runtimeKyma *v1beta2.Kyma) {
	remote.Remember(cluster, seenRuntimeKyma{kyma: runtimeKyma.DeepCopy()})
}

// finalizerPatch patches the runtime Kyma's finalizers with an optimistic
// lock: a plain merge patch of the list would drop a finalizer another
// controller added meanwhile. A conflict is an error; the next reconcile
// reads the Kyma again.
func finalizerPatch(runtimeKyma *v1beta2.Kyma) client.Patch {
	return client.MergeFromWithOptions(runtimeKyma.DeepCopy(), client.MergeFromWithOptimisticLock{})
}

// deleteRuntimeKyma removes the runtime's own Kyma, finalizer and all, and
// the catalog copies kept next to it.
func deleteRuntimeKyma(ctx context.Context, c client.Client, key client.ObjectKey) error {
	for _, obj := range []client.Object{&v1beta2.ModuleTemplate{}, &v1beta2.ModuleReleaseMeta{}} {
		err := c.DeleteAllOf(ctx, obj, client.InNamespace(key.Namespace), client.MatchingLabels{v1beta2.CatalogLabel: "true"})
		if err != nil && !meta.IsNoMatchError(err) {
			return fmt.Errorf("deleting the runtime's catalog: %w", err)
		}
	}
	runtimeKyma := &v1beta2.Kyma{}
	if err := c.Get(ctx, key, runtimeKyma); err != nil {
		return client.IgnoreNotFound(err)
	}
	if controllerutil.ContainsFinalizer(runtimeKyma, v1beta2.KymaFinalizer) {
		patch := finalizerPatch(runtimeKyma)
		controllerutil.RemoveFinalizer(runtimeKyma, v1beta2.KymaFinalizer)
		if err := c.Patch(ctx, runtimeKyma, patch); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	return client.IgnoreNotFound(c.Delete(ctx, runtimeKyma))
}

// mirrorStatus copies the control plane's view of the Kyma into the
// runtime's Kyma, so that its owner sees it where they work.
func mirrorStatus(ctx context.Context, cluster *remote.Cluster, runtimeKyma *v1beta2.Kyma, kyma *v1beta2.Kyma) error {
	desired := kyma.Status.DeepCopy()
	desired.RuntimeModules = nil
	redactStatus(desired)
	if equality.Semantic.DeepEqual(&runtimeKyma.Status, desired) {
		return nil
	}
	base := runtimeKyma.DeepCopy()
	runtimeKyma.Status = *desired
	if err := cluster.Client.Status().Patch(ctx, runtimeKyma, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(err)
	}
	rememberRuntimeKyma(cluster, runtimeKyma)
	return nil
}

// unionModules is the set installed: the control plane's modules, then those
// only the runtime owner lists. A module both list is the control plane's
// entry, so neither side overwrites the other's choices.
func unionModules(kcp, runtime []v1beta2.Module) []v1beta2.Module {
	out := make([]v1beta2.Module, 0, len(kcp)+len(runtime))
	seen := make(map[string]bool, len(kcp))
	for _, m := range kcp {
		seen[m.Name] = true
		out = append(out, m)
	}
	extra := make([]v1beta2.Module, 0, len(runtime))
	for _, m := range runtime {
		if !seen[m.Name] {
			seen[m.Name] = true
			extra = append(extra, m)
		}
	}
	sort.SliceStable(extra, func(i, j int) bool { return extra[i].Name < extra[j].Name })
	return append(out, extra...)
}

package kyma

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/catalog"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// Taking over a Kyma from the Kyma lifecycle-manager (KLM), the Kyma's
// part (docs/migrating-from-klm.md; the modules are the Manifest
// controller's, manifest_takeover.go): KLM's finalizers on the Kyma go once
// this operator's is on it, the runtime's Kyma and KLM's copy of the
// catalog become this operator's in place, and KLM's runtime agent
// (skr-webhook), which reports to KLM's listener alone, is removed.

// releaseKLMFinalizers removes KLM's finalizers from a Kyma this operator
// takes over, once this operator's own finalizer is on it: the duties they
// stood for (removing the modules and the runtime side) are this
// operator's from then on. Left, they would hold a deleted Kyma for ever.
func (r *Reconciler) releaseKLMFinalizers(ctx context.Context, kyma *v1beta2.Kyma) error {
	klm := func(f string) bool { return slices.Contains(takeover.KymaFinalizers, f) }
	if !r.Takeover.Covers(kyma) || !controllerutil.ContainsFinalizer(kyma, v1beta2.KymaFinalizer) || !slices.ContainsFunc(kyma.Finalizers, klm) {
		return nil
	}
	patch := client.MergeFromWithOptions(kyma.DeepCopy(), client.MergeFromWithOptimisticLock{})
	kyma.Finalizers = slices.DeleteFunc(kyma.Finalizers, klm)
	if err := r.Patch(ctx, kyma, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed the Kyma lifecycle-manager's finalizers from the Kyma")
	return nil
}

// isKLMManifest leaves KLM's Manifests out of the Kyma's own: they are the
// takeover's (manifest_takeover.go), never installed from, deleted as a
// module no longer wanted, or counted in the Kyma's status.
func isKLMManifest(m *v1beta2.Manifest) bool { return takeover.IsKLMManifest(m) }

// runtimeTakenOver is the memo of a runtime whose KLM side was taken over.
type runtimeTakenOver struct{}

// klmRuntimeKymaManagers wrote the runtime's Kyma under KLM: its labels,
// its creation and status (as the user agent "manager"), and its Deleting
// status.
var klmRuntimeKymaManagers = sets.New(takeover.SyncContextManager, takeover.UserAgentManager, takeover.StatusManager)

// takeOverRuntime makes the runtime side KLM left this operator's, once
// per runtime (remembered with the runtime): the runtime's Kyma, KLM's
// copy of the catalog, and KLM's agent.
func (r *Reconciler) takeOverRuntime(ctx context.Context, cluster *remote.Cluster, kyma, runtimeKyma *v1beta2.Kyma) error {
	if !r.Takeover.Covers(kyma) {
		return nil
	}
	if _, done := remote.Recall[runtimeTakenOver](cluster); done {
		return nil
	}
	now := r.now()
	byKLM := func(live *metav1.ObjectMeta) bool {
		return live.Labels[v1beta2.ManagedByLabel] == takeover.ManagedByValue
	}
	kymaMove := takeover.Move{From: klmRuntimeKymaManagers, To: apply.FieldManager, Labels: RuntimeKymaLabels(), Claim: byKLM}
	if _, err := kymaMove.Apply(ctx, cluster.Client, v1beta2.GroupVersion.WithKind("Kyma"), client.ObjectKeyFromObject(runtimeKyma), now); err != nil {
		return fmt.Errorf("taking over the runtime's Kyma from the Kyma lifecycle-manager: %w", err)
	}
	if err := takeOverCatalog(ctx, cluster.Client, runtimeKyma.Namespace, now); err != nil {
		return err
	}
	if err := removeKLMAgent(ctx, cluster.Client, runtimeKyma.Namespace); err != nil {
		return err
	}
	remote.Remember(cluster, runtimeTakenOver{})
	return nil
}

// takeOverCatalog makes KLM's copies of the catalog (ModuleTemplates and
// ModuleReleaseMetas it wrote as catalog-sync, the only mark KLM itself
// knows them by) this operator's copies: the catalog sync then updates
// them in place and deletes those the control plane no longer has.
func takeOverCatalog(ctx context.Context, c client.Client, namespace string, now time.Time) error {
	move := takeover.Move{
		From:   sets.New(takeover.CatalogManager),
		To:     catalog.FieldManager,
		Labels: map[string]string{v1beta2.CatalogLabel: "true", v1beta2.ManagedByLabel: v1beta2.ManagedByValue},
		Claim: func(live *metav1.ObjectMeta) bool {
			return slices.ContainsFunc(live.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == takeover.CatalogManager })
		},
	}
	for _, kind := range []string{"ModuleTemplate", "ModuleReleaseMeta"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(v1beta2.GroupVersion.WithKind(kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("listing the runtime's catalog: %w", err)
		}
		for i := range list.Items {
			if _, err := move.Apply(ctx, c, v1beta2.GroupVersion.WithKind(kind), client.ObjectKeyFromObject(&list.Items[i]), now); err != nil {
				return fmt.Errorf("taking over the runtime's catalog from the Kyma lifecycle-manager: %w", err)
			}
		}
	}
	return nil
}

// removeKLMAgent deletes KLM's runtime agent: it reports to KLM's listener
// alone, and this operator's runtime-watcher replaces it. The webhook
// configuration goes first, so that no request waits on a webhook whose
// server is going. Only objects KLM labelled as its own are deleted.
func removeKLMAgent(ctx context.Context, c client.Client, namespace string) error {
	for _, o := range takeover.Agent {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(o.GVK)
		key := o.Key(namespace)
		if err := c.Get(ctx, key, live); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("reading the Kyma lifecycle-manager's agent: %w", err)
		}
		if live.Labels[v1beta2.ManagedByLabel] != takeover.ManagedByValue {
			continue // not KLM's: someone else's under the same name
		}
		if err := c.Delete(ctx, live); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing the Kyma lifecycle-manager's agent (%s %s): %w", o.GVK.Kind, o.Name, err)
		}
	}
	return nil
}

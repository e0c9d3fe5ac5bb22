package manifest

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

// ConditionReady is the Manifest's kstatus-compatible summary condition.
const ConditionReady = "Ready"

// Reasons of the Ready condition. Stable: dashboards and alerts key on them.
const (
	reasonReady                     = "Ready"
	reasonProcessing                = "Processing"
	reasonWarning                   = "Warning"
	reasonRuntimeUnavailable        = "RuntimeUnavailable"
	reasonContentFailed             = "ContentFailed"
	reasonApplyFailed               = "ApplyFailed"
	reasonPruneFailed               = "PruneFailed"
	reasonReadinessFailed           = "ReadinessCheckFailed"
	reasonModuleError               = "ModuleError"
	reasonDeleting                  = "Deleting"
	reasonWaitingForCustomResources = "WaitingForCustomResources"
	reasonDeleteFailed              = "DeleteFailed"
	// reasonOwnershipConflict: the module's content names objects that
	// exist and are not the module's; nothing was applied.
	reasonOwnershipConflict   = "OwnershipConflict"
	reasonWaitingForNamespace = "WaitingForNamespace"
)

// setState records the Manifest's state with its Ready condition. The
// condition only changes (and with it lastTransitionTime) when status, reason
// or message change, so a steady state is not rewritten.
func setState(manifest *v1beta2.Manifest, state v1beta2.State, reason, message string) {
	status := metav1.ConditionFalse
	if state == v1beta2.StateReady {
		status = metav1.ConditionTrue
	}
	changed := manifest.Status.State != state
	cond := meta.FindStatusCondition(manifest.Status.Conditions, ConditionReady)
	if cond == nil || cond.Status != status || cond.Reason != reason || cond.Message != message {
		changed = true
	}
	manifest.Status.State = state
	meta.SetStatusCondition(&manifest.Status.Conditions, metav1.Condition{
		Type:               ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: manifest.Generation,
	})
	if changed {
		op := message
		if op == "" {
			op = string(state)
		}
		manifest.Status.LastOperation = v1beta2.LastOperation{Operation: op, LastUpdateTime: metav1.NewTime(time.Now())}
	}
}

// setReadiness maps what the runtime reported to the Manifest's state.
func setReadiness(manifest *v1beta2.Manifest, readiness apply.Readiness) {
	switch readiness.State {
	case v1beta2.StateReady:
		setState(manifest, v1beta2.StateReady, reasonReady, "Module is installed and ready")
	case v1beta2.StateWarning:
		setState(manifest, v1beta2.StateWarning, reasonWarning, readiness.Message)
	case v1beta2.StateError:
		setState(manifest, v1beta2.StateError, reasonModuleError, readiness.Message)
	default:
		setState(manifest, v1beta2.StateProcessing, reasonProcessing, readiness.Message)
	}
}

// moduleReadiness combines the manager workload and the module CR: the
// module is as ready as the less ready of the two.
func moduleReadiness(ctx context.Context, c client.Reader, manifest *v1beta2.Manifest, cr *unstructured.Unstructured, syncNamespace string) (apply.Readiness, error) {
	manager, err := apply.ManagerReadiness(ctx, c, manifest.Spec.Manager, syncNamespace)
	if err != nil {
		return apply.Readiness{}, err
	}
	if manager.State != v1beta2.StateReady {
		return manager, nil
	}
	return apply.CustomResourceReadiness(ctx, c, cr)
}

// defaultCustomResource is the module's default CR when the Manifest's policy
// is CreateAndDelete, placed in the sync namespace when it is namespaced and
// names none.
func defaultCustomResource(manifest *v1beta2.Manifest, syncNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) (*unstructured.Unstructured, error) {
	if manifest.Spec.Resource == nil || manifest.Spec.CustomResourcePolicy == v1beta2.CustomResourcePolicyIgnore {
		return nil, nil
	}
	cr := manifest.Spec.Resource.DeepCopy()
	if cr.GetNamespace() == "" {
		isNamespaced, err := namespaced(cr.GroupVersionKind())
		if err != nil {
			return nil, fmt.Errorf("looking up kind %s of the default custom resource: %w", cr.GroupVersionKind(), err)
		}
		if isNamespaced {
			cr.SetNamespace(syncNamespace)
		}
	}
	labels := cr.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1beta2.ManagedByLabel] = v1beta2.ManagedByValue
	labels[v1beta2.KymaNameLabel] = kymaName(manifest)
	labels[v1beta2.ModuleNameLabel] = manifest.Spec.ModuleName
	cr.SetLabels(labels)
	return cr, nil
}

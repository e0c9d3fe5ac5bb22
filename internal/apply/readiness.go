package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Readiness is what the runtime says about a module's health.
type Readiness struct {
	State   v1beta2.State
	Message string
	// Pending is the object a module on its way to Ready waits for, as it
	// was read; nil when it is not waiting.
	Pending *Pending
}

// Pending is an object a module's readiness waits for, as it was read: an
// empty ResourceVersion means it did not exist.
type Pending struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
	ResourceVersion string
	Labels          map[string]string
}

// pending describes obj, read as gvk at key, or missing when obj is nil.
func pending(gvk schema.GroupVersionKind, key client.ObjectKey, obj *unstructured.Unstructured) *Pending {
	p := &Pending{GVK: gvk, Namespace: key.Namespace, Name: key.Name}
	if obj != nil {
		p.ResourceVersion, p.Labels = obj.GetResourceVersion(), obj.GetLabels()
	}
	return p
}

// ManagerReadiness reads the module's manager workload (a Deployment or
// StatefulSet, or any kind kstatus understands) and says whether it is ready.
func ManagerReadiness(ctx context.Context, c client.Reader, manager *v1beta2.Manager, defaultNamespace string) (Readiness, error) {
	if manager == nil {
		return Readiness{State: v1beta2.StateReady}, nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: manager.Group, Version: manager.Version, Kind: manager.Kind})
	namespace := manager.Namespace
	if namespace == "" {
		namespace = defaultNamespace
	}
	subject := fmt.Sprintf("%s %s/%s", manager.Kind, namespace, manager.Name)
	key := client.ObjectKey{Namespace: namespace, Name: manager.Name}
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return Readiness{State: v1beta2.StateProcessing, Message: subject + " does not exist yet", Pending: pending(obj.GroupVersionKind(), key, nil)}, nil
		}
		return Readiness{}, fmt.Errorf("reading manager %s: %w", subject, err)
	}
	result, err := status.Compute(obj)
	if err != nil {
		return Readiness{}, fmt.Errorf("computing status of %s: %w", subject, err)
	}
	switch result.Status {
	case status.CurrentStatus:
		return Readiness{State: v1beta2.StateReady}, nil
	case status.FailedStatus:
		return Readiness{State: v1beta2.StateError, Message: subject + ": " + result.Message}, nil
	default:
		return Readiness{State: v1beta2.StateProcessing, Message: subject + " is not ready: " + result.Message, Pending: pending(obj.GroupVersionKind(), key, obj)}, nil
	}
}

// CustomResourceReadiness reads the module's custom resource and maps its
// status.state (the module operator's own report) to a module state. A
// resource without a state yet counts as Processing.
func CustomResourceReadiness(ctx context.Context, c client.Reader, cr *unstructured.Unstructured) (Readiness, error) {
	if cr == nil {
		return Readiness{State: v1beta2.StateReady}, nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(cr.GroupVersionKind())
	subject := fmt.Sprintf("%s %s", cr.GetKind(), client.ObjectKeyFromObject(cr))
	key := client.ObjectKeyFromObject(cr)
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return Readiness{State: v1beta2.StateProcessing, Message: subject + " does not exist yet", Pending: pending(cr.GroupVersionKind(), key, nil)}, nil
		}
		return Readiness{}, fmt.Errorf("reading %s: %w", subject, err)
	}
	state, _, _ := unstructured.NestedString(obj.Object, "status", "state")
	switch v1beta2.State(state) {
	case v1beta2.StateReady:
		return Readiness{State: v1beta2.StateReady}, nil
	case v1beta2.StateWarning:
		return Readiness{State: v1beta2.StateWarning, Message: subject + " reports Warning"}, nil
	case v1beta2.StateError:
		return Readiness{State: v1beta2.StateError, Message: subject + " reports Error"}, nil
	case v1beta2.StateDeleting:
		return Readiness{State: v1beta2.StateDeleting, Message: subject + " is being deleted"}, nil
	default:
		return Readiness{State: v1beta2.StateProcessing, Message: subject + " has not reported Ready", Pending: pending(cr.GroupVersionKind(), key, obj)}, nil
	}
}

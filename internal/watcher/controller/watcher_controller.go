package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Condition type and reasons of a Watcher.
const (
	ConditionReady = "Ready"
	// ReasonInUse: the Watcher's rule is part of every watched runtime's
	// webhook configuration (applied on each runtime's next reconcile).
	ReasonInUse = "InUse"
	// ReasonInvalid: the Watcher cannot become a webhook rule; the message
	// says what to fix.
	ReasonInvalid = "Invalid"
)

// StatusReconciler keeps Watcher status: whether its rule is valid and used.
// Which runtimes run it is the AgentReconciler's business, per Kyma.
type StatusReconciler struct {
	Client client.Client
}

// Reconcile computes the Watcher's status from its spec.
func (r *StatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &v1beta2.Watcher{}
	if err := r.Client.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := w.DeepCopy()
	setWatcherStatus(w)
	if equality.Semantic.DeepEqual(base.Status, w.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Patch(ctx, w, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// setWatcherStatus reads nothing but the Watcher.
func setWatcherStatus(w *v1beta2.Watcher) {
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonInUse,
		Message: "The rule is part of the webhook configuration of every watched runtime", ObservedGeneration: w.Generation}
	state := v1beta2.StateReady
	if err := validate(w); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalid, err.Error()
		state = v1beta2.StateError
	}
	meta.SetStatusCondition(&w.Status.Conditions, cond)
	w.Status.State = state
	if state == v1beta2.StateReady {
		w.Status.ObservedGeneration = w.Generation
	}
}

// DefaultWatcherName names the Watcher created at start.
const DefaultWatcherName = "kyma-watcher"

// DefaultWatcher is the Watcher every installation starts with: it reports
// changes of the spec of each runtime's own Kyma (labelled watched-by: kyma),
// which is where runtime owners choose modules.
func DefaultWatcher(namespace string, listenerPort int64) *v1beta2.Watcher {
	return &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{
			Name: DefaultWatcherName, Namespace: namespace,
			Labels: map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue},
		},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "lifecycle-manager-listener", Namespace: namespace, Port: listenerPort},
			LabelsToWatch:   map[string]string{v1beta2.WatchedByLabel: "kyma"},
			ResourceToWatch: v1beta2.WatchableGVR{Group: v1beta2.GroupVersion.Group, Version: v1beta2.GroupVersion.Version, Resource: "kymas"},
			Field:           v1beta2.SpecField,
			Manager:         "lifecycle-manager",
		},
	}
}

// CreateDefault creates w once, when the manager starts, unless a Watcher of
// that name exists: a deleted or edited default stays as the SRE left it
// until the next start.
func CreateDefault(c client.Client, w *v1beta2.Watcher) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		if err := c.Create(ctx, w.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the default Watcher: %w", err)
		}
		return nil
	})
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// Reasons of a Watcher's conditions (Ready, and Stalled while its spec is
// invalid), stable for alerts and tools.
const (
	// ReasonInUse (Ready=True): the Watcher's rule is valid and part of the
	// webhook configuration of every watched runtime, as of each runtime's
	// next agent reconcile, which a Watcher change starts at once.
	ReasonInUse = "InUse"
	// ReasonInvalid (Ready=False, Stalled=True): the Watcher cannot become a
	// webhook rule and is left out of every runtime's configuration; the
	// message names each field and the fix. Editing the spec retries it.
	ReasonInvalid = "Invalid"
)

// StatusReconciler keeps Watcher status: whether its rule is valid and used.
// Which runtimes run it is the AgentReconciler's business, per Kyma.
type StatusReconciler struct {
	Client client.Client
	// Events reports why a Watcher is invalid; optional.
	Events *reconciler.Events
}

// Reconcile computes the Watcher's status from its spec, on the one
// reconcile skeleton: a Watcher has no finalizer and no pause, and its only
// phase reads nothing but the Watcher.
func (r *StatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &v1beta2.Watcher{}
	if err := r.Client.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return reconciler.Run(ctx, r.Client, w, reconciler.Phases[*v1beta2.Watcher]{
		Controller: "watcher",
		Reconcile:  func(_ context.Context, w *v1beta2.Watcher) reconciler.Outcome { return watcherOutcome(w) },
		Record:     recordWatcher,
		Status:     func(w *v1beta2.Watcher) any { return w.Status },
		Events:     r.Events,
	})
}

// watcherOutcome is how a Watcher stands, from its spec alone. An invalid
// one is Stalled: only an edit can fix it, and the message says which.
func watcherOutcome(w *v1beta2.Watcher) reconciler.Outcome {
	problems := specProblems(w)
	if len(problems) == 0 {
		return reconciler.Ready(ReasonInUse, "The rule is part of the webhook configuration of every watched runtime", 0)
	}
	message := "Fix the spec; the Watcher is left out of every runtime's webhook configuration until then: " + strings.Join(problems, "; ")
	return reconciler.Stalled(ReasonInvalid, message, errors.New(message))
}

// recordWatcher records o in the Watcher's status. A Stalled Watcher has its
// observedGeneration moved too (reconciler.Record does so for every kind):
// its current spec was looked at and found invalid.
func recordWatcher(w *v1beta2.Watcher, o reconciler.Outcome) {
	reconciler.Record(reconciler.Status{
		Conditions: &w.Status.Conditions, State: &w.Status.State, ObservedGeneration: &w.Status.ObservedGeneration,
	}, w.Generation, o)
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

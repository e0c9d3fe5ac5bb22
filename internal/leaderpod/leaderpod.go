// Package leaderpod labels the Pod of the process that leads its shard, so
// that the listener's Service, which selects the label, sends the runtimes'
// reports to the leader alone while every replica, standbys included, is
// ready (docs/architecture.md, "Readiness and the listener").
//
// Handover: a process clears the label from its own Pod when it starts
// (a container restarted after it lost the lease keeps its Pod and its
// labels), sets it once elected, and clears it again when it stops, before
// the manager releases the Lease. The readiness check fails until the
// label says what the process is, so that a Pod with a stale label is never
// both ready and selected.
package leaderpod

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Label marks the Pod of its shard's leader; the chart's listener Services
// select it with the value "true".
const Label = "operator.kyma-project.io/leader"

// DeletionCost is the leader Pod's pod-deletion-cost: a ReplicaSet scaled
// down (a rolling update's old one, or fewer replicas) deletes its standbys
// before its leader, so that a rolling update hands leadership over once,
// not once per old pod.
const DeletionCost = "1"

// deletionCostAnnotation is Kubernetes' pod-deletion-cost annotation.
const deletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// clearTimeout bounds the last patch at shutdown: the Pod's termination
// grace period must leave room for the rest of the shutdown.
const clearTimeout = 5 * time.Second

// Labeller keeps the leader label of its own Pod in step with the process's
// role. Add it to the manager as a runnable and its Check as a readiness
// check.
type Labeller struct {
	// Client writes the Pod: a direct client, since no Pod is cached.
	Client client.Client
	// Pod is the process's own Pod (downward API POD_NAME, POD_NAMESPACE).
	Pod types.NamespacedName
	// Elected is closed once the process leads (ctrl.Manager.Elected).
	Elected <-chan struct{}

	mu sync.Mutex
	// leading and labelled are the role and what the Pod was last written
	// to say; synced is false until the first write succeeded.
	leading, labelled, synced bool
	// lastErr is the last failed write, for the readiness check.
	lastErr error
}

// NeedLeaderElection is false: standbys clear a stale label too.
func (l *Labeller) NeedLeaderElection() bool { return false }

// Start clears the label, sets it once elected, and clears it when ctx ends.
func (l *Labeller) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("pod", l.Pod.String())
	if err := l.write(ctx, false); err != nil {
		return nil //nolint:nilerr // ctx ended before the first write: nothing to undo
	}
	select {
	case <-ctx.Done():
		return nil
	case <-l.Elected:
	}
	l.mu.Lock()
	l.leading = true
	l.mu.Unlock()
	if err := l.write(ctx, true); err != nil {
		// Stopped before the label was set: clear it anyway, in case the
		// last try reached the API server.
		l.clearAtShutdown(log)
		return nil
	}
	log.Info("Labelled the leader's Pod", "label", Label)
	<-ctx.Done()
	l.clearAtShutdown(log)
	return nil
}

// clearAtShutdown removes the label before the manager releases the Lease,
// so that the Service stops sending reports here before a new leader is
// elected. Best effort: a terminating Pod leaves the Service's endpoints
// anyway, and a restarted container clears the label when it starts.
func (l *Labeller) clearAtShutdown(log logr.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), clearTimeout)
	defer cancel()
	if err := l.patch(ctx, false); err != nil {
		log.Error(err, "Clearing the leader label of the Pod at shutdown")
	}
}

// write patches the label until it succeeds or ctx ends, with backoff: the
// API server may be briefly away, and a missing right must show in the
// readiness check rather than end the process.
func (l *Labeller) write(ctx context.Context, leader bool) error {
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
	return wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := l.patch(ctx, leader)
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.lastErr = err
			ctrl.LoggerFrom(ctx).Error(err, "Writing the leader label of the Pod", "pod", l.Pod.String(), "leader", leader)
			return false, nil
		}
		l.labelled, l.synced, l.lastErr = leader, true, nil
		return true, nil
	})
}

// patch sets or removes the label and the deletion cost with a JSON merge
// patch: two keys of the Pod's metadata, which the kubelet and the
// ReplicaSet controller leave alone, need no read first and no field
// manager of their own.
func (l *Labeller) patch(ctx context.Context, leader bool) error {
	label, cost := "null", "null"
	if leader {
		label, cost = `"true"`, `"`+DeletionCost+`"`
	}
	body := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s},"annotations":{%q:%s}}}`, Label, label, deletionCostAnnotation, cost)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: l.Pod.Namespace, Name: l.Pod.Name}}
	if err := l.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("labelling Pod %s (POD_NAME and POD_NAMESPACE must name this process's own Pod): %w", l.Pod, err)
	}
	return nil
}

// Check is a readiness check: it passes once the Pod's label says what the
// process is, the leader's Pod labelled and a standby's not.
func (l *Labeller) Check(*http.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.synced:
		return errors.Join(errors.New("the Pod's leader label is not cleared yet"), l.lastErr)
	case l.leading && !l.labelled:
		return errors.Join(errors.New("leading, but the Pod is not labelled as the leader yet"), l.lastErr)
	}
	return nil
}

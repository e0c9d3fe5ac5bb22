package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/runtime-fleet/lifecycle-manager/internal/leaderpod"
)

// setupReadiness adds the readiness checks. Ready means serving or ready to
// lead, not leading: a standby whose cache is synced takes over at once, and
// Kubernetes counts it (a Deployment with standbys becomes Available, a
// rolling update moves on). The listener's traffic reaches the leader alone
// through its Pod's leader label, which the readiness check keeps honest.
func setupReadiness(mgr ctrl.Manager, opts Options) error {
	if err := mgr.AddReadyzCheck("cache", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	if opts.Pod.Name == "" {
		ctrl.Log.WithName("setup").Info("Not labelling the leader's Pod: POD_NAME is not set, and the chart's listener Service selects that label")
		return nil
	}
	if opts.Pod.Namespace != "" && opts.Pod.Namespace != opts.Namespace {
		return fmt.Errorf("the operator's Pod runs in namespace %q but --namespace is %q: its Role lets it label Pods in --namespace only, so install it into %q",
			opts.Pod.Namespace, opts.Namespace, opts.Namespace)
	}
	pod := opts.Pod
	pod.Namespace = opts.Namespace
	// Without leader election Elected is closed at start: the one process
	// leads and labels its Pod.
	labeller := &leaderpod.Labeller{Client: mgr.GetClient(), Pod: pod, Elected: mgr.Elected()}
	if err := mgr.Add(labeller); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("leader-label", labeller.Check)
}

// cacheSyncWait is how long a readiness probe waits for the cache; below
// the kubelet's default probe timeout of 1 s.
const cacheSyncWait = 500 * time.Millisecond

// cacheSynced passes once the manager's cache has started and synced what
// it holds: the Kymas, Manifests and Secrets every process watches (their
// indexes start the informers), standby or not.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the cache has not synced yet")
		}
		return nil
	}
}

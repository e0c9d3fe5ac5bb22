package operator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener"
)

// watcherReporting answers the Manifest controller's question "does the
// watcher report every change to this module's objects now?" from what the
// operator already holds: the Kyma (cache), the listener's Health and the
// Watchers (cache). It is the only thing the Manifest controller learns of
// the watcher.
type watcherReporting struct {
	reader    client.Reader
	namespace string
	health    *listener.Health
	// watched tells whether a Kyma's runtime reports at all (not paused).
	watched func(*v1beta2.Kyma) bool
	// moduleResources is true when agents carry the built-in rules that
	// report every change of a module's objects (internal/watcher/controller
	// moduleHooks), whatever Watchers exist.
	moduleResources bool
}

var (
	_ manifest.Reporting = watcherReporting{}
	_ kyma.Reporting     = watcherReporting{}
	_ kyma.Liveness      = watcherReporting{}
)

// AgentLiveness answers from the listener's Health: no runtime id or
// reporting paused is no agent; heard within the silence timeout is
// heard; silent past it (after the grace that follows a start) is silent.
func (w watcherReporting) AgentLiveness(k *v1beta2.Kyma, now time.Time) kyma.AgentLiveness {
	id := k.Labels[v1beta2.RuntimeIDLabel]
	switch {
	case id == "" || !w.watched(k):
		return kyma.AgentNotWatched
	case w.health.Heard(id, now):
		return kyma.AgentHeard
	case w.health.Silent(id, now):
		return kyma.AgentSilent
	default:
		return kyma.AgentPending
	}
}

// Reports is true when the Kyma's agent was heard from within the silence
// timeout, its reporting is not paused, and the built-in module rules or
// valid Watchers report changes to every resource of the module's objects.
func (w watcherReporting) Reports(ctx context.Context, kymaName string, objects manifest.ModuleObjects) bool {
	kyma, ok := w.heard(ctx, kymaName)
	if !ok {
		return false
	}
	if w.moduleResources {
		return inReportedNamespaces(kyma.Spec.SyncNamespace, objects)
	}
	watchers := &v1beta2.WatcherList{}
	if err := w.reader.List(ctx, watchers, client.InNamespace(w.namespace)); err != nil {
		return false
	}
	return watchersReport(watchers.Items, kyma.Spec.SyncNamespace, objects)
}

// ReportsKyma is true when the Kyma's agent was heard from within the
// silence timeout, its reporting is not paused, and a valid Watcher reports
// changes to the runtime's own Kyma (the default Watcher does, unless an
// SRE deleted or changed it).
func (w watcherReporting) ReportsKyma(ctx context.Context, kymaName string) bool {
	if _, ok := w.heard(ctx, kymaName); !ok {
		return false
	}
	watchers := &v1beta2.WatcherList{}
	if err := w.reader.List(ctx, watchers, client.InNamespace(w.namespace)); err != nil {
		return false
	}
	return runtimeKymaReported(watchers.Items)
}

// heard returns the Kyma (the cache's own copy) and whether its runtime's
// agent reports now: heard from within the silence timeout, not paused.
func (w watcherReporting) heard(ctx context.Context, kymaName string) (*v1beta2.Kyma, bool) {
	kyma := &v1beta2.Kyma{}
	if err := w.reader.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: kymaName}, kyma, client.UnsafeDisableDeepCopy); err != nil {
		return nil, false
	}
	id := kyma.Labels[v1beta2.RuntimeIDLabel]
	if id == "" || !w.watched(kyma) || !w.health.Heard(id, time.Now()) {
		return nil, false
	}
	return kyma, true
}

// runtimeKymaReported tells whether the Watchers make an agent report every
// create, delete and spec change of the runtime's own Kyma, which lives in
// the sync namespace that the agent's webhooks always see, labelled as
// kyma_runtime.go creates it.
func runtimeKymaReported(watchers []v1beta2.Watcher) bool {
	kymas := schema.GroupVersionResource{Group: v1beta2.GroupVersion.Group, Version: v1beta2.GroupVersion.Version, Resource: "kymas"}
	return anyWatcherReports(watchers, kymas, kyma.RuntimeKymaLabels())
}

// watchersReport tells whether the Watchers make a runtime's agent report
// every create, delete and spec change of the objects, by the rules the
// webhook configuration is rendered with (internal/watcher/controller
// render.go): a Watcher reports its resource in any version (match policy
// Equivalent), when its field is spec, when its labels are a subset of the
// objects' labels and when it is valid (not Stalled, so rendered). With a
// Kyma's own sync namespace the webhooks see only that namespace, so every
// namespaced object must be in it, and no Namespace object is reported.
func watchersReport(watchers []v1beta2.Watcher, kymaSyncNamespace string, objects manifest.ModuleObjects) bool {
	if !inReportedNamespaces(kymaSyncNamespace, objects) {
		return false
	}
	for _, res := range objects.Resources {
		if !anyWatcherReports(watchers, res, objects.Labels) {
			return false
		}
	}
	return true
}

// inReportedNamespaces tells whether an agent's webhooks can see every one
// of the objects: with a Kyma's own sync namespace they see only that
// namespace, so every namespaced object must be in it, and no Namespace
// object is reported.
func inReportedNamespaces(kymaSyncNamespace string, objects manifest.ModuleObjects) bool {
	if len(objects.Resources) == 0 {
		return false
	}
	if kymaSyncNamespace == "" {
		return true
	}
	for _, ns := range objects.Namespaces {
		if ns != kymaSyncNamespace {
			return false
		}
	}
	for _, res := range objects.Resources {
		if res.Group == "" && res.Resource == "namespaces" {
			return false
		}
	}
	return true
}

func anyWatcherReports(watchers []v1beta2.Watcher, res schema.GroupVersionResource, labels map[string]string) bool {
	for i := range watchers {
		w := &watchers[i]
		if w.Spec.Field != v1beta2.SpecField || !w.DeletionTimestamp.IsZero() ||
			meta.IsStatusConditionTrue(w.Status.Conditions, v1beta2.ConditionStalled) {
			continue
		}
		if w.Spec.ResourceToWatch.Group != res.Group || w.Spec.ResourceToWatch.Resource != res.Resource {
			continue
		}
		if subset(w.Spec.LabelsToWatch, labels) {
			return true
		}
	}
	return false
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

package kyma

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/redact"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// setModuleStatuses computes status.modules and status.activeChannel from
// what was resolved and the Kyma's Manifests (see moduleStatuses), and the
// removals in the operation history (noteRemovals). It reads
// nothing but its arguments; the conditions and status.state follow from the
// outcome (outcomeOf), which the skeleton records.
func setModuleStatuses(kyma *v1beta2.Kyma, modules []resolve.Module, manifests map[string]*v1beta2.Manifest, clock *readyClock, now time.Time) {
	previous := kyma.Status.Modules
	kyma.Status.Modules = moduleStatuses(kyma, modules, manifests)
	noteRemovals(kyma, previous, manifests, metav1.NewTime(now))
	for _, ms := range kyma.Status.Modules {
		clock.observe(kyma.Name, ms.Name, ms.State)
	}
	kyma.Status.ActiveChannel = kyma.Spec.Channel
	if kyma.Status.ActiveChannel == "" {
		kyma.Status.ActiveChannel = v1beta2.DefaultChannel
	}
}

// moduleStatuses is one entry per resolved module, then one per Manifest
// of a module no longer wanted: that module stays listed, Deleting, until
// its Manifest is gone, so that an uninstall that is stuck shows (KLM does
// the same). Messages are bounded (reconciler.BoundMessage): they quote
// errors and the Manifests' messages, which quote the module's own status.
func moduleStatuses(kyma *v1beta2.Kyma, modules []resolve.Module, manifests map[string]*v1beta2.Manifest) []v1beta2.ModuleStatus {
	statuses := make([]v1beta2.ModuleStatus, 0, len(modules))
	listed := make(map[string]bool, len(modules))
	for i := range modules {
		name := ManifestName(kyma.Name, modules[i].Name)
		listed[name] = true
		statuses = append(statuses, moduleStatus(&modules[i], manifests[name]))
	}
	statuses = append(statuses, removalStatuses(kyma, manifests, listed)...)
	for i := range statuses {
		statuses[i].Message = reconciler.BoundMessage(statuses[i].Message)
	}
	return statuses
}

// removalStatuses lists the Manifests not in listed as modules being
// removed, sorted by name. An entry the Kyma had for the module keeps its
// channel, version and references.
func removalStatuses(kyma *v1beta2.Kyma, manifests map[string]*v1beta2.Manifest, listed map[string]bool) []v1beta2.ModuleStatus {
	previous := make(map[string]v1beta2.ModuleStatus, len(kyma.Status.Modules))
	for _, ms := range kyma.Status.Modules {
		previous[ManifestName(kyma.Name, ms.Name)] = ms
	}
	var out []v1beta2.ModuleStatus
	for name, m := range manifests {
		if listed[name] {
			continue
		}
		ms, ok := previous[name]
		if !ok {
			moduleName := moduleOf(m)
			ms = v1beta2.ModuleStatus{Name: moduleName, FQDN: moduleName, Version: m.Spec.Version, Manifest: manifestRef(m)}
		}
		ms.State = v1beta2.StateDeleting
		ms.Message = removalMessage(m)
		out = append(out, ms)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// moduleOf is the name of the module a Manifest installs.
func moduleOf(m *v1beta2.Manifest) string {
	if m.Spec.ModuleName != "" {
		return m.Spec.ModuleName
	}
	return m.Labels[v1beta2.ModuleNameLabel]
}

// removalMessage says how the removal of a module is going: the Manifest's
// own word once its controller works on the removal (it names custom
// resources that block it), else that it has begun.
func removalMessage(m *v1beta2.Manifest) string {
	if !m.DeletionTimestamp.IsZero() && (m.Status.State == v1beta2.StateDeleting || m.Status.State == v1beta2.StateError) {
		if message := readyMessage(m); message != "" {
			return message
		}
	}
	return "Removing the module from the runtime"
}

func manifestRef(m *v1beta2.Manifest) *v1beta2.TrackingObject {
	return &v1beta2.TrackingObject{
		TypeMeta:    metav1.TypeMeta{APIVersion: v1beta2.GroupVersion.String(), Kind: "Manifest"},
		PartialMeta: v1beta2.PartialMeta{Name: m.Name, Namespace: m.Namespace, Generation: m.Generation},
	}
}

func moduleStatus(module *resolve.Module, m *v1beta2.Manifest) v1beta2.ModuleStatus {
	ms := v1beta2.ModuleStatus{
		Name:             module.Name,
		FQDN:             module.Name,
		Channel:          module.Channel,
		Version:          module.Version,
		OCMComponentName: module.OCMComponentName,
		ManualUpgrade:    module.ManualUpgrade,
	}
	if module.Template != nil {
		ms.Template = &v1beta2.TrackingObject{
			TypeMeta:    metav1.TypeMeta{APIVersion: v1beta2.GroupVersion.String(), Kind: "ModuleTemplate"},
			PartialMeta: v1beta2.PartialMeta{Name: module.Template.Name, Namespace: module.Template.Namespace, Generation: module.Template.Generation},
		}
	}
	if m != nil {
		ms.Manifest = manifestRef(m)
		if m.Spec.Resource != nil {
			ms.Resource = &v1beta2.TrackingObject{
				TypeMeta:    metav1.TypeMeta{APIVersion: m.Spec.Resource.GetAPIVersion(), Kind: m.Spec.Resource.GetKind()},
				PartialMeta: v1beta2.PartialMeta{Name: m.Spec.Resource.GetName(), Namespace: m.Spec.Resource.GetNamespace()},
			}
		}
	}

	switch {
	case !module.Spec.Managed:
		ms.State = v1beta2.StateUnmanaged
		ms.Message = "Module is not managed (managed: false); its resources are left as they are"
	case module.Err != nil:
		ms.State = v1beta2.StateError
		// Resolve and pin errors may quote a template's link: never its
		// credentials.
		ms.Message = redact.Text(module.Err.Error())
		if m != nil {
			ms.Version = m.Spec.Version // what is installed stays installed
		}
	case m == nil:
		ms.State = v1beta2.StateProcessing
		ms.Message = "Creating the module's Manifest"
	case m.Status.ObservedGeneration != m.Generation || m.Status.State == "" || m.Spec.Version != module.Version:
		// The cache may still hold the Manifest as it was before this
		// reconcile wrote the new version: its Ready is the old version's.
		ms.State = v1beta2.StateProcessing
		ms.Message = fmt.Sprintf("Installing version %s", module.Version)
		if mu := module.ManualUpgrade; mu != nil && mu.Forced && mu.Version == module.Version {
			ms.Message = fmt.Sprintf("Installing version %s without the runtime owner's approval: its deadline %s passed",
				module.Version, mu.ForceAt.UTC().Format(time.RFC3339))
		}
		if m.Status.State == v1beta2.StateError {
			ms.State = v1beta2.StateError
			ms.Message = readyMessage(m)
		}
	default:
		ms.State = m.Status.State
		if ms.State != v1beta2.StateReady {
			ms.Message = readyMessage(m)
		} else if module.Held != "" {
			ms.Message = module.Held
			ms.Maintenance = module.Maintenance
		}
	}
	if m != nil && !m.DeletionTimestamp.IsZero() && module.Spec.Managed {
		ms.State = v1beta2.StateDeleting
		ms.Message = removalMessage(m)
	}
	return ms
}

func readyMessage(m *v1beta2.Manifest) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, "Ready"); c != nil {
		return c.Message
	}
	return ""
}

// setPaused records that reconciliation is skipped; the rest of the status
// is left as last observed.
func (r *Reconciler) setPaused(kyma *v1beta2.Kyma) {
	condition := metav1.Condition{
		Type: ConditionPaused, Status: metav1.ConditionTrue, Reason: ReasonPaused, ObservedGeneration: kyma.Generation,
		Message: "Reconciliation is paused by the label " + v1beta2.SkipReconciliationLabel + " or the pause selector; deletion still runs",
	}
	if sleep, asleep := r.Pause.Asleep(kyma); asleep && r.Pause.Wake(kyma) > 0 {
		condition.Reason = ReasonHibernated
		condition.Message = fmt.Sprintf("Hibernated by schedule %s until %s: nothing is reconciled until then; deletion still runs",
			sleep.Schedule, sleep.Until.UTC().Format(time.RFC3339))
	}
	meta.SetStatusCondition(&kyma.Status.Conditions, condition)
}

// recordOutcome writes o into the Kyma's status through the skeleton's
// Record (kstatus conditions, the state derived from them,
// observedGeneration), drops the Paused condition (a recorded outcome is
// one of a Kyma that is worked on), sets or drops FieldsIgnored
// (kyma_ignored.go), and notes a change of state in lastOperation.
func recordOutcome(kyma *v1beta2.Kyma, o reconciler.Outcome) {
	before := kyma.Status.State
	reconciler.Record(reconciler.Status{
		Conditions: &kyma.Status.Conditions, State: &kyma.Status.State, ObservedGeneration: &kyma.Status.ObservedGeneration,
	}, kyma.Generation, o)
	meta.RemoveStatusCondition(&kyma.Status.Conditions, ConditionPaused)
	if o.Records() {
		setFieldsIgnored(kyma)
	}
	if kyma.Status.State != before {
		kyma.Status.LastOperation = v1beta2.LastOperation{
			Operation: "Kyma is " + string(kyma.Status.State), LastUpdateTime: metav1.NewTime(time.Now()),
		}
	}
}

// readyClock measures how long modules take from Processing or Error to
// Ready, for the time-to-ready histogram. It keeps, per module of a Kyma, when
// it was first seen not Ready.
type readyClock struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func newReadyClock() *readyClock {
	return &readyClock{since: map[string]time.Time{}}
}

func (c *readyClock) observe(kyma, module string, state v1beta2.State) {
	key := kyma + "/" + module
	c.mu.Lock()
	defer c.mu.Unlock()
	start, waiting := c.since[key]
	switch {
	case state == v1beta2.StateReady && waiting:
		metrics.ModuleTimeToReady.WithLabelValues(module).Observe(time.Since(start).Seconds())
		delete(c.since, key)
	case (state == v1beta2.StateProcessing || state == v1beta2.StateError) && !waiting:
		c.since[key] = time.Now()
	}
}

// updateMetrics sets the Kyma's state gauges, replacing its own earlier
// series only.
func updateMetrics(kyma *v1beta2.Kyma) {
	modules := make(map[string]string, len(kyma.Status.Modules))
	for _, m := range kyma.Status.Modules {
		modules[m.Name] = string(m.State)
	}
	metrics.SetKymaStates(kyma.Name, string(kyma.Status.State), modules)
}

func forgetMetrics(kyma string) {
	metrics.ForgetKyma(kyma)
}

package kyma

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// Condition types of a Kyma.
const (
	// ConditionReady is True when every module is Ready (or Unmanaged) and
	// the runtime is reachable.
	ConditionReady = "Ready"
	// ConditionPaused is True while reconciliation is skipped by label.
	ConditionPaused = "Paused"
)

// Reasons of the Kyma's conditions. Stable: dashboards and alerts key on
// them. A module name is never a reason; module detail is in status.modules.
const (
	ReasonReady              = "Ready"
	ReasonModulesNotReady    = "ModulesNotReady"
	ReasonModulesFailed      = "ModulesFailed"
	ReasonRuntimeUnavailable = "RuntimeUnavailable"
	ReasonDeleting           = "Deleting"
	ReasonPaused             = "SkipReconciliationLabel"
	ReasonNotPaused          = "Reconciling"

	// ReasonKubeconfigRefused: the runtime's kubeconfig asks for more than
	// inline credentials (a plugin, a file, a proxy, skipped TLS
	// verification); nothing is tried until its Secret changes.
	ReasonKubeconfigRefused = "KubeconfigRefused"
)

// stateRank orders states worst first for aggregation.
var stateRank = map[v1beta2.State]int{
	v1beta2.StateError:      0,
	v1beta2.StateWarning:    1,
	v1beta2.StateDeleting:   2,
	v1beta2.StateProcessing: 3,
	v1beta2.StateReady:      4,
	v1beta2.StateUnmanaged:  5,
}

func worse(a, b v1beta2.State) v1beta2.State {
	if stateRank[b] < stateRank[a] {
		return b
	}
	return a
}

// setStatus computes the Kyma's status from what was resolved and what the
// Manifests report. It reads nothing but its arguments.
func setStatus(kyma *v1beta2.Kyma, modules []resolve.Module, manifests map[string]*v1beta2.Manifest, runtimeErr error, clock *readyClock) {
	statuses := make([]v1beta2.ModuleStatus, 0, len(modules))
	state := v1beta2.StateReady
	notReady, failed := 0, 0
	for i := range modules {
		ms := moduleStatus(&modules[i], manifests[ManifestName(kyma.Name, modules[i].Name)])
		clock.observe(kyma.Name, ms.Name, ms.State)
		statuses = append(statuses, ms)
		state = worse(state, ms.State)
		switch ms.State {
		case v1beta2.StateReady, v1beta2.StateUnmanaged:
		case v1beta2.StateError:
			failed++
			notReady++
		default:
			notReady++
		}
	}
	kyma.Status.Modules = statuses
	kyma.Status.ActiveChannel = kyma.Spec.Channel
	if kyma.Status.ActiveChannel == "" {
		kyma.Status.ActiveChannel = v1beta2.DefaultChannel
	}

	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady, Message: "All modules are ready"}
	switch {
	case errors.Is(runtimeErr, remote.ErrKubeconfigRefused):
		// The error names the Secret, the refused field and the fix, and
		// never a value of the kubeconfig.
		state = v1beta2.StateError
		cond = metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonKubeconfigRefused,
			Message: runtimeErr.Error()}
	case runtimeErr != nil:
		state = v1beta2.StateError
		cond = metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonRuntimeUnavailable,
			Message: "The runtime cannot be reached or used: " + runtimeErr.Error()}
	case failed > 0:
		cond = metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonModulesFailed,
			Message: fmt.Sprintf("%d of %d modules are in Error; see status.modules", failed, len(modules))}
	case notReady > 0:
		cond = metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonModulesNotReady,
			Message: fmt.Sprintf("%d of %d modules are not ready yet", notReady, len(modules))}
	}
	if len(modules) == 0 && runtimeErr == nil {
		cond.Message = "No modules to install"
	}
	setCondition(kyma, cond)
	meta.RemoveStatusCondition(&kyma.Status.Conditions, ConditionPaused)
	setState(kyma, state)
	if runtimeErr == nil {
		kyma.Status.ObservedGeneration = kyma.Generation
	}
}

func moduleStatus(module *resolve.Module, m *v1beta2.Manifest) v1beta2.ModuleStatus {
	ms := v1beta2.ModuleStatus{
		Name:    module.Name,
		FQDN:    module.Name,
		Channel: module.Channel,
		Version: module.Version,
	}
	if module.Template != nil {
		ms.Template = &v1beta2.TrackingObject{
			TypeMeta:    metav1.TypeMeta{APIVersion: v1beta2.GroupVersion.String(), Kind: "ModuleTemplate"},
			PartialMeta: v1beta2.PartialMeta{Name: module.Template.Name, Namespace: module.Template.Namespace, Generation: module.Template.Generation},
		}
	}
	if m != nil {
		ms.Manifest = &v1beta2.TrackingObject{
			TypeMeta:    metav1.TypeMeta{APIVersion: v1beta2.GroupVersion.String(), Kind: "Manifest"},
			PartialMeta: v1beta2.PartialMeta{Name: m.Name, Namespace: m.Namespace, Generation: m.Generation},
		}
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
		ms.Message = module.Err.Error()
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
		if m.Status.State == v1beta2.StateError {
			ms.State = v1beta2.StateError
			ms.Message = readyMessage(m)
		}
	default:
		ms.State = m.Status.State
		if ms.State != v1beta2.StateReady {
			ms.Message = readyMessage(m)
		}
	}
	if m != nil && !m.DeletionTimestamp.IsZero() && module.Spec.Managed {
		ms.State = v1beta2.StateDeleting
		ms.Message = readyMessage(m)
	}
	return ms
}

func readyMessage(m *v1beta2.Manifest) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, "Ready"); c != nil {
		return c.Message
	}
	return ""
}

// setDeleting reports a Kyma waiting for its Manifests to be removed.
func setDeleting(kyma *v1beta2.Kyma, remaining map[string]*v1beta2.Manifest) {
	for i := range kyma.Status.Modules {
		ms := &kyma.Status.Modules[i]
		if m, ok := remaining[ManifestName(kyma.Name, ms.Name)]; ok {
			ms.State = v1beta2.StateDeleting
			ms.Message = readyMessage(m)
		}
	}
	setCondition(kyma, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonDeleting,
		Message: fmt.Sprintf("Waiting for %d modules to be removed from the runtime", len(remaining))})
	setState(kyma, v1beta2.StateDeleting)
}

// setPaused records that reconciliation is skipped; the rest of the status
// is left as last observed.
func setPaused(kyma *v1beta2.Kyma) {
	setCondition(kyma, metav1.Condition{Type: ConditionPaused, Status: metav1.ConditionTrue, Reason: ReasonPaused,
		Message: "Reconciliation is paused by the label " + v1beta2.SkipReconciliationLabel})
}

func setCondition(kyma *v1beta2.Kyma, cond metav1.Condition) {
	cond.ObservedGeneration = kyma.Generation
	meta.SetStatusCondition(&kyma.Status.Conditions, cond)
}

func setState(kyma *v1beta2.Kyma, state v1beta2.State) {
	if kyma.Status.State != state {
		kyma.Status.LastOperation = v1beta2.LastOperation{Operation: "Kyma is " + string(state), LastUpdateTime: metav1.NewTime(time.Now())}
	}
	kyma.Status.State = state
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

func updateMetrics(kyma *v1beta2.Kyma) {
	forgetMetrics(kyma.Name)
	metrics.KymaState.WithLabelValues(kyma.Name, string(kyma.Status.State)).Set(1)
	for _, m := range kyma.Status.Modules {
		metrics.ModuleState.WithLabelValues(kyma.Name, m.Name, string(m.State)).Set(1)
	}
}

func forgetMetrics(kyma string) {
	metrics.KymaState.DeletePartialMatch(map[string]string{"kyma": kyma})
	metrics.ModuleState.DeletePartialMatch(map[string]string{"kyma": kyma})
}

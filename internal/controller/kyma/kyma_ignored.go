package kyma

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// ReasonAcceptedForCompatibility is the reason of ConditionFieldsIgnored.
const ReasonAcceptedForCompatibility = "AcceptedForCompatibility"

// maxNamedIgnored is how many ignored fields the condition names; the rest
// are counted.
const maxNamedIgnored = 5

// setFieldsIgnored sets ConditionFieldsIgnored while a module of the Kyma,
// or of the runtime's Kyma (status.runtimeModules), sets a field that
// resources written for the Kyma lifecycle-manager API carry and that this
// operator accepts but does not act on, and drops it once none does.
// Refusing them would break those resources (SPEC: they apply unchanged);
// ignoring them silently would let a user believe they work. KLM documents
// remoteModuleTemplateRef as deprecated and without function, and
// controller as a way to split modules between controller deployments.
func setFieldsIgnored(kyma *v1beta2.Kyma) {
	c := fieldsIgnored(kyma.Spec.Modules, kyma.Status.RuntimeModules)
	if c == nil {
		meta.RemoveStatusCondition(&kyma.Status.Conditions, ConditionFieldsIgnored)
		return
	}
	c.ObservedGeneration = kyma.Generation
	meta.SetStatusCondition(&kyma.Status.Conditions, *c)
}

// fieldsIgnored is the FieldsIgnored condition for the Kyma's modules and
// the runtime's Kyma's modules, or nil when neither sets an ignored field.
// The message names the fields in list order, the Kyma's first, so that it
// changes only when they do.
func fieldsIgnored(modules, runtimeModules []v1beta2.Module) *metav1.Condition {
	var named []string
	note := func(where string, list []v1beta2.Module) {
		for _, m := range list {
			if m.ControllerName != "" {
				named = append(named, fmt.Sprintf("%sspec.modules[%s].controller", where, m.Name))
			}
			if m.RemoteModuleTemplateRef != "" {
				named = append(named, fmt.Sprintf("%sspec.modules[%s].remoteModuleTemplateRef", where, m.Name))
			}
		}
	}
	note("", modules)
	note("the runtime's Kyma ", runtimeModules)
	if len(named) == 0 {
		return nil
	}
	list := strings.Join(named[:min(len(named), maxNamedIgnored)], ", ")
	if len(named) > maxNamedIgnored {
		list += fmt.Sprintf(" and %d more", len(named)-maxNamedIgnored)
	}
	return &metav1.Condition{
		Type: ConditionFieldsIgnored, Status: metav1.ConditionTrue, Reason: ReasonAcceptedForCompatibility,
		Message: reconciler.BoundMessage("Accepted for compatibility with the Kyma lifecycle-manager API and ignored: " + list +
			". One set of controllers reconciles every module (controller), and module templates are read from the control plane only (remoteModuleTemplateRef); remove these fields, nothing changes"),
	}
}

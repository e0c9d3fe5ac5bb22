// Package status computes the fleet at a glance from the Kymas in a control
// plane: one summary per runtime and the state of each of its modules. It is
// the model behind `lmctl status` and the live progress of `lmctl dev`, so
// that both say the same thing about the same objects.
//
// The model is a stable struct of its own rather than raw Kymas: scripts
// read `lmctl status -o json`, and should not break when the Kyma status
// grows fields.
package status

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Fleet is every runtime (Kyma) in one control-plane namespace.
type Fleet struct {
	Runtimes []Runtime `json:"runtimes"`
}

// Runtime is one Kyma: its state and how many of its modules are Ready.
type Runtime struct {
	// Name is the Kyma's name.
	Name string `json:"name"`
	// RuntimeID is the Kyma's kyma-project.io/runtime-id label.
	RuntimeID string `json:"runtimeID,omitempty"`
	// State is the Kyma's status.state; empty until the operator first
	// reports.
	State v1beta2.State `json:"state,omitempty"`
	// Message is the Ready condition's message when the runtime is not
	// Ready: the reason in one line.
	Message string `json:"message,omitempty"`
	// Paused is the Paused condition's message while the runtime is
	// paused: by the skip-reconciliation label, the pause selector, or its
	// hibernation schedule (which says until when).
	Paused string `json:"paused,omitempty"`
	// Channel is the Kyma's channel.
	Channel string `json:"channel,omitempty"`
	// ModulesReady counts the modules in state Ready.
	ModulesReady int `json:"modulesReady"`
	// ModulesTotal counts every module the runtime should have: those in
	// status, and those in spec the operator has not reported yet.
	ModulesTotal int `json:"modulesTotal"`
	// Created is the Kyma's creation time.
	Created time.Time `json:"created"`
	// Modules are the runtime's modules by name.
	Modules []Module `json:"modules"`
}

// Module is one module of one runtime.
type Module struct {
	Name    string        `json:"name"`
	Version string        `json:"version,omitempty"`
	Channel string        `json:"channel,omitempty"`
	State   v1beta2.State `json:"state,omitempty"`
	Message string        `json:"message,omitempty"`
	// ManualUpgrade is the newer version offered to a module that
	// upgrades manually, until it is installed; while it waits, Message
	// says which version and until when.
	ManualUpgrade *v1beta2.ManualUpgradeStatus `json:"manualUpgrade,omitempty"`
}

// Get lists the Kymas in namespace and summarises them.
func Get(ctx context.Context, c client.Reader, namespace string) (Fleet, error) {
	var kymas v1beta2.KymaList
	if err := c.List(ctx, &kymas, client.InNamespace(namespace)); err != nil {
		return Fleet{}, fmt.Errorf("listing Kymas in namespace %s: %w", namespace, err)
	}
	return FromKymas(kymas.Items), nil
}

// FromKymas summarises Kymas, sorted by name, each runtime's modules sorted
// by name, so that repeated calls on an unchanged fleet compare equal.
func FromKymas(kymas []v1beta2.Kyma) Fleet {
	fleet := Fleet{Runtimes: make([]Runtime, 0, len(kymas))}
	for i := range kymas {
		fleet.Runtimes = append(fleet.Runtimes, fromKyma(&kymas[i]))
	}
	slices.SortFunc(fleet.Runtimes, func(a, b Runtime) int { return cmp.Compare(a.Name, b.Name) })
	return fleet
}

func fromKyma(kyma *v1beta2.Kyma) Runtime {
	rt := Runtime{
		Name:      kyma.Name,
		RuntimeID: kyma.Labels[v1beta2.RuntimeIDLabel],
		State:     kyma.Status.State,
		Channel:   cmp.Or(kyma.Spec.Channel, v1beta2.DefaultChannel),
		Created:   kyma.CreationTimestamp.Time,
		Modules:   []Module{},
	}
	if rt.State != v1beta2.StateReady {
		if c := apimeta.FindStatusCondition(kyma.Status.Conditions, "Ready"); c != nil && c.Status != metav1.ConditionTrue {
			rt.Message = c.Message
		}
	}
	if c := apimeta.FindStatusCondition(kyma.Status.Conditions, "Paused"); c != nil && c.Status == metav1.ConditionTrue {
		rt.Paused = c.Message
	}
	reported := map[string]bool{}
	for _, ms := range kyma.Status.Modules {
		reported[ms.Name] = true
		rt.Modules = append(rt.Modules, Module{
			Name: ms.Name, Version: ms.Version, Channel: ms.Channel, State: ms.State, Message: ms.Message,
			ManualUpgrade: ms.ManualUpgrade,
		})
	}
	// A module just added to the spec has no status entry until the operator
	// gets to it; it still counts, or a fleet would look Ready too early.
	for _, m := range kyma.Spec.Modules {
		if !reported[m.Name] {
			reported[m.Name] = true
			rt.Modules = append(rt.Modules, Module{Name: m.Name, Channel: cmp.Or(m.Channel, rt.Channel)})
		}
	}
	slices.SortFunc(rt.Modules, func(a, b Module) int { return cmp.Compare(a.Name, b.Name) })
	rt.ModulesTotal = len(rt.Modules)
	for _, m := range rt.Modules {
		if m.State == v1beta2.StateReady {
			rt.ModulesReady++
		}
	}
	return rt
}

// Runtime returns the runtime named name.
func (f Fleet) Runtime(name string) (Runtime, bool) {
	for _, rt := range f.Runtimes {
		if rt.Name == name {
			return rt, true
		}
	}
	return Runtime{}, false
}

// Ready reports whether the runtime and every one of its modules is Ready
// (an unmanaged module is left alone and does not hold it back).
func (r Runtime) Ready() bool {
	if r.State != v1beta2.StateReady {
		return false
	}
	for _, m := range r.Modules {
		if m.State != v1beta2.StateReady && m.State != v1beta2.StateUnmanaged {
			return false
		}
	}
	return true
}

// ModuleCounts returns how many modules of the fleet are Ready, and how many
// there are.
func (f Fleet) ModuleCounts() (ready, total int) {
	for _, rt := range f.Runtimes {
		ready += rt.ModulesReady
		total += rt.ModulesTotal
	}
	return ready, total
}

package kyma

import (
	"fmt"
	"strings"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// ReasonModulesChanged is the reason of the one Normal event a Kyma
// reconcile emits when it installs, upgrades or removes modules: one event
// per reconcile, not one per module, as each event is a write to the
// control plane.
const ReasonModulesChanged = "ModulesChanged"

// maxNamedModules is how many modules of each kind an event names; the
// rest are counted.
const maxNamedModules = 10

// moduleChanges collects what a reconcile did to a Kyma's modules, for its
// one event.
type moduleChanges struct {
	installing, upgrading, removing []string
}

func (c *moduleChanges) install(module, version string) {
	c.installing = append(c.installing, module+" "+version)
}

func (c *moduleChanges) upgrade(module, from, to string) {
	c.upgrading = append(c.upgrading, fmt.Sprintf("%s %s to %s", module, from, to))
}

func (c *moduleChanges) remove(module string) {
	c.removing = append(c.removing, module)
}

// note is the event's text, e.g. "Installing 2 modules: a 1.0.0, b 1.0.0;
// removing 1 module: c"; empty when nothing changed.
func (c *moduleChanges) note() string {
	var parts []string
	for _, kind := range []struct {
		verb  string
		names []string
	}{{"Installing", c.installing}, {"Upgrading", c.upgrading}, {"Removing", c.removing}} {
		if len(kind.names) == 0 {
			continue
		}
		verb := kind.verb
		if len(parts) > 0 {
			verb = strings.ToLower(verb)
		}
		noun := "modules"
		if len(kind.names) == 1 {
			noun = "module"
		}
		parts = append(parts, fmt.Sprintf("%s %d %s: %s", verb, len(kind.names), noun, namedList(kind.names)))
	}
	return strings.Join(parts, "; ")
}

func namedList(names []string) string {
	if len(names) <= maxNamedModules {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxNamedModules], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNamedModules)
}

// reportChanges emits the reconcile's one event about its modules, if any
// changed.
func (r *Reconciler) reportChanges(kyma *v1beta2.Kyma, changes *moduleChanges) {
	if note := changes.note(); note != "" {
		r.events.Normal(kyma, ReasonModulesChanged, note)
	}
}

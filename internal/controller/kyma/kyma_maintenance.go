package kyma

import (
	"fmt"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// Maintenance windows (SPEC G2, internal/maintenance). An upgrade to a
// version whose template requires downtime runs only inside the runtime's
// maintenance window, from the runtime's own point in it; until then the
// module stays at the installed version, says until when, and the Kyma is
// looked at again at that moment. A Kyma with skipMaintenanceWindows
// upgrades at once; so does a fresh install, which takes nothing down.

// holdForWindow holds the module until its window when it must wait for
// it.
func holdForWindow(r *Reconciler, c holdCase) verdict {
	held, until := r.windowHold(c.kyma, c.module, c.existing, c.now)
	return verdict{held: held, until: until, maintenance: held != ""}
}

// windowHold says why the module must wait for its window and until
// when, or "" when it may move now.
func (r *Reconciler) windowHold(kyma *v1beta2.Kyma, module *resolve.Module, existing *v1beta2.Manifest, now time.Time) (string, time.Time) {
	if r.Maintenance == nil || kyma.Spec.SkipMaintenanceWindows || existing == nil || module.Template == nil ||
		!module.Template.Spec.RequiresDowntime || existing.Spec.Version == module.Version || !module.Installable() || module.Err != nil {
		return "", time.Time{}
	}
	slot, ok := r.Maintenance.SlotFor(kyma.Name, kyma.Labels, now)
	if !ok {
		return fmt.Sprintf("Version %s requires downtime and no maintenance window matches this Kyma's labels; %s stays installed. "+
			"Add a window for it, or set spec.skipMaintenanceWindows", module.Version, existing.Spec.Version), time.Time{}
	}
	if slot.Open(now) {
		return "", time.Time{}
	}
	return fmt.Sprintf("Version %s requires downtime: it is installed in maintenance window %s, at %s; %s stays installed until then",
		module.Version, slot.Window, slot.At.UTC().Format(time.RFC3339), existing.Spec.Version), slot.At
}

// wakeForWindows shortens a settled outcome's requeue to the first moment
// a held module's window lets it move.
func wakeForWindows(o reconciler.Outcome, modules []resolve.Module, now time.Time) reconciler.Outcome {
	if o.Kind != reconciler.KindReady && o.Kind != reconciler.KindWarning && o.Kind != reconciler.KindProgressing {
		return o
	}
	for _, m := range modules {
		if m.HeldUntil.IsZero() {
			continue
		}
		if wait := max(m.HeldUntil.Sub(now), time.Second); o.After <= 0 || wait < o.After {
			o.After = wait
		}
	}
	return o
}

package kyma

import (
	"fmt"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// refuseUntrusted says why a resolved module must not be installed as it
// stands, or returns nil. The caller reports the error on the module and
// leaves its Manifest, and so what is installed, untouched.
//
//   - A template that targets the control plane and declares no RBAC
//     (stored before admission refused it): its operator's token would be
//     the runtime's admin.
//   - Values that the runtime's Kyma sets under keys the module does not
//     allow (see checkRuntimeValues).
func refuseUntrusted(module *resolve.Module, fromRuntime bool) error {
	if !module.Spec.Managed || !module.Installable() {
		return nil
	}
	if module.Template.Spec.Target == v1beta2.TargetControlPlane && module.Template.Spec.RBAC == nil {
		return fmt.Errorf("module %s: ModuleTemplate %s targets the control plane and declares no RBAC (spec.rbac); "+
			"its operator would get the runtime's admin rights: publish the module with spec.rbac, or with target: runtime", module.Name, module.Template.Name)
	}
	if fromRuntime {
		return checkRuntimeValues(module.Template, module.Spec)
	}
	return nil
}

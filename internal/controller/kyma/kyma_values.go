package kyma

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// chartValues are the Helm values of a chart module: the template's
// spec.data.spec, overridden key by key by the Kyma module's values.
func chartValues(template *v1beta2.ModuleTemplate, module v1beta2.Module) (*runtime.RawExtension, error) {
	var base map[string]any
	if template.Spec.Data != nil {
		if spec, ok := template.Spec.Data.Object["spec"].(map[string]any); ok {
			base = spec
		}
	}
	var override map[string]any
	if module.Values != nil && len(module.Values.Raw) > 0 {
		if err := json.Unmarshal(module.Values.Raw, &override); err != nil {
			return nil, fmt.Errorf("module %s: values must be an object: %w", module.Name, err)
		}
	}
	merged := mergeValues(base, override)
	if merged == nil {
		return nil, nil
	}
	data, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("encoding values of module %s: %w", module.Name, err)
	}
	return &runtime.RawExtension{Raw: data}, nil
}

// mergeValues merges override onto base the way Helm coalesces values
// files: objects merge key by key, anything else replaces. Neither input is
// changed.
func mergeValues(base, override map[string]any) map[string]any {
	if base == nil && override == nil {
		return nil
	}
	out := make(map[string]any, len(base)+len(override))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range override {
		if vm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(bm, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// runtimeOnlyModules names the modules that only the runtime's Kyma lists.
// Their whole entry, values included, is the runtime owner's; for a module
// both Kymas list, the control plane's entry wins (see unionModules).
func runtimeOnlyModules(kcp, runtime []v1beta2.Module) map[string]bool {
	inKCP := make(map[string]bool, len(kcp))
	for _, m := range kcp {
		inKCP[m.Name] = true
	}
	out := map[string]bool{}
	for _, m := range runtime {
		if !inKCP[m.Name] {
			out[m.Name] = true
		}
	}
	return out
}

// maxKeysNamed bounds how many refused keys a message lists.
const maxKeysNamed = 5

// checkRuntimeValues refuses values that a runtime owner set under keys the
// module does not allow (ModuleTemplate spec.runtimeValues). A chart may pass
// a value to tpl, into an image reference or into RBAC, so a runtime owner
// sets only what the module team opened up; the SRE's values in the control
// plane's Kyma are not checked.
func checkRuntimeValues(template *v1beta2.ModuleTemplate, module v1beta2.Module) error {
	if module.Values == nil || len(module.Values.Raw) == 0 {
		return nil
	}
	var values map[string]any
	if err := json.Unmarshal(module.Values.Raw, &values); err != nil {
		return fmt.Errorf("module %s: values in the runtime's Kyma must be an object: %w", module.Name, err)
	}
	refused := disallowedValueKeys(values, template.Spec.RuntimeValues)
	if len(refused) == 0 {
		return nil
	}
	named := refused
	if len(named) > maxKeysNamed {
		named = append(named[:maxKeysNamed:maxKeysNamed], fmt.Sprintf("and %d more", len(refused)-maxKeysNamed))
	}
	allowed := "none"
	if len(template.Spec.RuntimeValues) > 0 {
		allowed = strings.Join(template.Spec.RuntimeValues, ", ")
	}
	return fmt.Errorf("module %s: the runtime's Kyma sets values the module does not allow from the runtime: %s (allowed: %s); "+
		"remove them from the module's values in the runtime's Kyma, or have them set in the control plane's Kyma; "+
		"nothing is changed until then",
		module.Name, strings.Join(named, ", "), allowed)
}

// disallowedValueKeys returns, sorted, the dotted paths in values that no
// allowed key covers. An allowed key covers its whole subtree; an object on
// the way to an allowed key is looked into; anything else is refused where
// it stands. A key that itself holds a dot is always refused, as it would
// read as a path it is not.
func disallowedValueKeys(values map[string]any, allowed []string) []string {
	allow := make(map[string]bool, len(allowed))
	onTheWay := map[string]bool{}
	for _, key := range allowed {
		allow[key] = true
		parts := strings.Split(key, ".")
		for i := 1; i < len(parts); i++ {
			onTheWay[strings.Join(parts[:i], ".")] = true
		}
	}
	var refused []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for key, value := range m {
			path := key
			if prefix != "" {
				path = prefix + "." + key
			}
			switch {
			case strings.Contains(key, "."):
				refused = append(refused, strconv.Quote(path))
			case allow[path]:
			case onTheWay[path]:
				if sub, ok := value.(map[string]any); ok {
					walk(path, sub)
					continue
				}
				refused = append(refused, path)
			default:
				refused = append(refused, path)
			}
		}
	}
	walk("", values)
	sort.Strings(refused)
	return refused
}

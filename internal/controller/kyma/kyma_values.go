package kyma

import (
	"encoding/json"
	"fmt"

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

// Package module is `lmctl module`: package a module version (a kustomize
// directory or a Helm chart, a default custom resource, the manager and the
// declared RBAC, named in a module.yaml) into an OCI artifact with a layer
// per part, push it, and print the digest-pinned ModuleTemplate and the
// ModuleReleaseMeta that publish it; and scaffold a new module repository
// from the template operator (SPEC R16).
package module

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// ConfigFile is the module configuration's default file name.
const ConfigFile = "module.yaml"

// Config is a module.yaml: what a module version is made of and how it is
// published. Paths are relative to the file's directory and stay inside it.
type Config struct {
	// Name is the module's name (ModuleTemplate spec.moduleName).
	Name string `json:"name"`
	// Version is the module version, semantic (spec.version; the artifact's tag).
	Version string `json:"version"`
	// Channel the ModuleReleaseMeta puts Version on ("regular" when empty).
	Channel string `json:"channel,omitempty"`
	// Mandatory publishes the version as mandatory instead of on a channel.
	Mandatory bool `json:"mandatory,omitempty"`
	// Kustomize is a kustomization directory: the content, rendered as
	// `kubectl apply -k` would. Exactly one of Kustomize and Chart is set.
	Kustomize string `json:"kustomize,omitempty"`
	// Chart is a Helm chart directory or a packaged chart (.tgz).
	Chart string `json:"chart,omitempty"`
	// DefaultCR is a file with the module's default custom resource
	// (spec.data). Not for charts: their values.yaml is spec.data instead.
	DefaultCR string `json:"defaultCR,omitempty"`
	// Manager is the workload whose readiness tells the module's health.
	Manager *Manager `json:"manager,omitempty"`
	// RBAC is what the module's operator may do in a runtime (spec.rbac).
	RBAC *v1beta2.ModuleRBAC `json:"rbac,omitempty"`
	// RequiresDowntime: upgrades to this version wait for maintenance windows.
	RequiresDowntime bool `json:"requiresDowntime,omitempty"`
	// Beta and Internal label the template so that only Kymas labelled the
	// same get it.
	Beta     bool `json:"beta,omitempty"`
	Internal bool `json:"internal,omitempty"`
	// Target is "runtime" (default) or "control-plane".
	Target string `json:"target,omitempty"`
	// RuntimeValues are the values keys the runtime owner may set.
	RuntimeValues []string `json:"runtimeValues,omitempty"`
	// Info are the module's repository and documentation links.
	Info *v1beta2.ModuleInfo `json:"info,omitempty"`
}

// Manager names the module's manager workload.
type Manager struct {
	// APIVersion is "apps/v1" when empty.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is "Deployment" when empty.
	Kind      string `json:"kind,omitempty"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// LoadConfig reads and checks the module configuration at file in fsys.
func LoadConfig(fsys fs.FS, file string) (*Config, error) {
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, fmt.Errorf("reading the module configuration: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cfg, nil
}

// ParseConfig parses a module.yaml strictly (an unknown field is a typo)
// and checks it.
func ParseConfig(data []byte) (*Config, error) {
	cfg := &Config{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, err
	}
	if cfg.Channel == "" && !cfg.Mandatory {
		cfg.Channel = v1beta2.DefaultChannel
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Validate says what is wrong with the configuration, all at once.
func (c *Config) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %q: %s", c.Name, strings.Join(msgs, "; ")))
	}
	if _, err := semver.StrictNewVersion(c.Version); err != nil {
		errs = append(errs, fmt.Errorf("version %q is not a semantic version (1.2.3)", c.Version))
	}
	if (c.Kustomize == "") == (c.Chart == "") {
		errs = append(errs, errors.New("set exactly one of kustomize (a kustomization directory) and chart (a Helm chart)"))
	}
	if c.Chart != "" && c.DefaultCR != "" {
		errs = append(errs, errors.New("defaultCR is not for charts: a chart module's spec.data is its values.yaml"))
	}
	if c.Mandatory && c.Channel != "" {
		errs = append(errs, errors.New("a mandatory module has no channel"))
	}
	for _, f := range [][2]string{{"kustomize", c.Kustomize}, {"chart", c.Chart}, {"defaultCR", c.DefaultCR}} {
		if f[1] != "" && !fs.ValidPath(path.Clean(f[1])) {
			errs = append(errs, fmt.Errorf("%s %q: give a path inside the module's directory", f[0], f[1]))
		}
	}
	if c.Manager != nil && c.Manager.Name == "" {
		errs = append(errs, errors.New("manager needs a name"))
	}
	switch c.Target {
	case "", v1beta2.TargetRuntime, v1beta2.TargetControlPlane:
	default:
		errs = append(errs, fmt.Errorf("target %q: want %s or %s", c.Target, v1beta2.TargetRuntime, v1beta2.TargetControlPlane))
	}
	if c.Target == v1beta2.TargetControlPlane && c.RBAC == nil {
		errs = append(errs, errors.New("target control-plane needs rbac"))
	}
	return errors.Join(errs...)
}

package ocm

import (
	"strings"
)

// componentDescriptorsPrefix is where the OCIRegistry mapping keeps
// component versions under a repository's base: the component name becomes
// the rest of the OCI repository name, the version its tag.
const componentDescriptorsPrefix = "component-descriptors/"

// Repository is the OCI repository that holds one component's versions,
// host[:port]/path/component-descriptors/<component name>.
type Repository struct {
	// Host is the registry, host[:port].
	Host string
	// Name is the whole reference without a tag: Host/…/component-descriptors/<component>.
	Name string
}

// repositoryOf finds where a component is stored: the descriptor's current
// repository context (the last one), which must be an OCI registry with
// the urlPath name mapping.
func repositoryOf(c Component) (Repository, error) {
	if len(c.RepositoryContexts) == 0 {
		return Repository{}, invalid("component %s names no repository (component.repositoryContexts is empty)", c)
	}
	if err := CheckComponentName(c.Name); err != nil {
		return Repository{}, err
	}
	rc := c.RepositoryContexts[len(c.RepositoryContexts)-1]
	kind, _, _ := strings.Cut(rc.Type, "/")
	if !strings.EqualFold(kind, "OCIRegistry") {
		return Repository{}, invalid("component %s: repository type %q is not supported; want OCIRegistry", c, rc.Type)
	}
	if rc.ComponentNameMapping != "" && rc.ComponentNameMapping != "urlPath" {
		return Repository{}, invalid("component %s: componentNameMapping %q is not supported; want urlPath", c, rc.ComponentNameMapping)
	}
	base := rc.BaseURL
	for _, scheme := range []string{"https://", "http://", "oci://"} {
		base = strings.TrimPrefix(base, scheme)
	}
	base = strings.Trim(base, "/")
	host, path, _ := strings.Cut(base, "/")
	if host == "" {
		return Repository{}, invalid("component %s: repository baseUrl %q names no registry", c, rc.BaseURL)
	}
	var parts []string
	for _, p := range []string{path, strings.Trim(rc.SubPath, "/")} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	parts = append(parts, componentDescriptorsPrefix+c.Name)
	return Repository{Host: host, Name: host + "/" + strings.Join(parts, "/")}, nil
}

// tagOf maps a component version to its OCI tag: OCI tags have no "+", so
// semantic versions' build metadata is written ".build-".
func tagOf(version string) string {
	return strings.Replace(version, "+", ".build-", 1)
}

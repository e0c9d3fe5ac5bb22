package ocm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

// A ModuleTemplate that KLM 1.20 and later installs need not embed its
// component descriptor: KLM reads it from the registry its
// --oci-registry-host names (with --modules-repository-subpath appended),
// at <host>[/<path>]/component-descriptors/<component>:<version>, where the
// component is the module's ModuleReleaseMeta's spec.ocmComponentName and
// the version the template's spec.version. It then reads the content from
// that registry too, not from the repository the descriptor names. This
// file is that lookup, for templates with neither spec.descriptor nor
// spec.resources.

// Base is a configured registry that holds the modules' component
// versions: --oci-registry-host, as KLM's flag of that name.
type Base struct {
	// Host is the registry, host[:port].
	Host string
	// Path is the repository prefix under the host, without slashes at
	// either end; empty for none.
	Path string
	// PlainHTTP is set when the flag's value starts with http://: the
	// registry is reached over plain HTTP, as KLM reaches it.
	PlainHTTP bool
}

// String is the registry as a reference prefix, host[/path].
func (b Base) String() string {
	if b.Path == "" {
		return b.Host
	}
	return b.Host + "/" + b.Path
}

// repository is where b keeps a component's versions.
func (b Base) repository(component string) Repository {
	return Repository{Host: b.Host, Name: b.String() + "/" + componentDescriptorsPrefix + component}
}

// repositoryPathSegment is a segment of an OCI repository name.
var repositoryPathSegment = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)

// ParseBase reads --oci-registry-host as KLM reads it: a registry host
// (host or host:port), optionally with a scheme (http:// for plain HTTP,
// https://) and a repository path, to which subPath
// (--modules-repository-subpath) is appended. Anything that could make the
// operator read elsewhere than written is refused: user information, a
// query or fragment, another scheme, path segments that are no OCI
// repository segments ("..", empty ones, upper case).
func ParseBase(value, subPath string) (Base, error) {
	raw := strings.TrimSpace(value)
	if raw == "" {
		return Base{}, fmt.Errorf("the registry host is empty")
	}
	var b Base
	switch {
	case strings.HasPrefix(raw, "http://"):
		b.PlainHTTP = true
		raw = strings.TrimPrefix(raw, "http://")
	case strings.HasPrefix(raw, "https://"):
		raw = strings.TrimPrefix(raw, "https://")
	case strings.Contains(raw, "://"):
		return Base{}, fmt.Errorf("registry host %q: only http:// and https:// are accepted as a scheme", value)
	}
	if strings.ContainsAny(raw, "@?#\\ \t\r\n") {
		return Base{}, fmt.Errorf("registry host %q: want host[:port][/path], without user information, query, fragment or spaces", value)
	}
	raw = strings.TrimSuffix(raw, "/")
	host, path, _ := strings.Cut(raw, "/")
	if err := checkRegistryHost(host); err != nil {
		return Base{}, fmt.Errorf("registry host %q: %w", value, err)
	}
	b.Host = strings.ToLower(host)
	var segments []string
	for _, p := range []string{path, strings.Trim(strings.TrimSpace(subPath), "/")} {
		if p == "" {
			continue
		}
		for seg := range strings.SplitSeq(p, "/") {
			if !repositoryPathSegment.MatchString(seg) {
				return Base{}, fmt.Errorf("registry path %q: segment %q is not an OCI repository name segment (lower-case letters, digits, and . _ - between them)", strings.Trim(path+"/"+subPath, "/"), seg)
			}
			segments = append(segments, seg)
		}
	}
	b.Path = strings.Join(segments, "/")
	return b, nil
}

// checkRegistryHost accepts host or host:port with a DNS name or an IP
// address (IPv6 in brackets) and a port in 1–65535.
func checkRegistryHost(hostPort string) error {
	if hostPort == "" {
		return fmt.Errorf("it names no host")
	}
	name := hostPort
	if h, port, err := net.SplitHostPort(hostPort); err == nil {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q is not in 1-65535", port)
		}
		name = h
	} else if strings.Contains(hostPort, ":") && !strings.HasPrefix(hostPort, "[") {
		return fmt.Errorf("%q is not host or host:port", hostPort)
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if net.ParseIP(name) != nil {
		return nil
	}
	if !dnsName.MatchString(strings.ToLower(name)) {
		return fmt.Errorf("%q is not a DNS name or an IP address", name)
	}
	return nil
}

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// componentName is an OCM component name as the component descriptor
// schema (v2) defines it, and as ModuleReleaseMeta's spec.ocmComponentName
// is validated: a domain, then one or more path segments. It never holds
// "..", an empty segment, a scheme or a tag, so a name cannot make a
// repository reference point elsewhere.
var componentName = regexp.MustCompile(`^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$`)

// maxComponentName is the longest component name, as
// spec.ocmComponentName allows it.
const maxComponentName = 255

// CheckComponentName refuses a name that is no OCM component name.
func CheckComponentName(name string) error {
	if len(name) > maxComponentName || !componentName.MatchString(name) {
		return invalid("component name %q is not an OCM component name: want a domain, then path segments, e.g. kyma-project.io/module/template-operator (lower case; no \"..\", no empty segments)", name)
	}
	return nil
}

// ociTag is the OCI distribution specification's tag.
var ociTag = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// checkVersion refuses a version that makes no OCI tag.
func checkVersion(version string) error {
	if !ociTag.MatchString(tagOf(version)) {
		return invalid("version %q cannot be an OCI tag", version)
	}
	return nil
}

// ComponentNames finds the OCM component of a template's module.
type ComponentNames interface {
	// ComponentName returns the module's component name and what names
	// it, for messages (e.g. `ModuleReleaseMeta "shop"`); source is empty
	// when nothing could name one, name when that names none. An error is
	// a failed lookup, to be retried.
	ComponentName(ctx context.Context, template *v1beta2.ModuleTemplate) (name, source string, err error)
}

// fromRegistryHost reads the component version of a template without an
// embedded descriptor from the configured registry, as KLM does, and links
// its content in that registry too, whatever repository the stored
// descriptor names.
func (r *Resolver) fromRegistryHost(ctx context.Context, template *v1beta2.ModuleTemplate) ([]v1beta2.ContentResource, error) {
	stored, repo, err := r.readFromRegistryHost(ctx, template)
	if err != nil {
		return nil, err
	}
	return Contents(stored, repo)
}

// Descriptor is the component descriptor a template's content comes from:
// its embedded one, or, without one, the one stored in the configured
// registry (Base). The Kyma API's localized images of a module are its
// Images. Its errors are those of Resources.
func (r *Resolver) Descriptor(ctx context.Context, template *v1beta2.ModuleTemplate) (*Descriptor, error) {
	if HasDescriptor(template) {
		return Parse(template.Spec.Descriptor.Raw)
	}
	d, _, err := r.readFromRegistryHost(ctx, template)
	return d, err
}

// readFromRegistryHost reads a template's component version from the
// configured registry: the component its ModuleReleaseMeta names, the
// version the template names.
func (r *Resolver) readFromRegistryHost(ctx context.Context, template *v1beta2.ModuleTemplate) (*Descriptor, Repository, error) {
	if r.Base == nil {
		return nil, Repository{}, invalid("no embedded descriptor (spec.descriptor) and no spec.resources; " +
			"set --oci-registry-host to the registry that holds the module's OCM component versions (KLM's flag of that name), " +
			"or publish the template with spec.resources or spec.descriptor")
	}
	if r.Registry == nil || r.Components == nil {
		return nil, Repository{}, errors.New("no registry access or component name lookup configured")
	}
	name, source, err := r.Components.ComponentName(ctx, template)
	if err != nil {
		return nil, Repository{}, fmt.Errorf("finding the module's OCM component: %w", err)
	}
	if source == "" {
		return nil, Repository{}, invalid("no embedded descriptor, and no ModuleReleaseMeta has spec.moduleName %q to name the module's OCM component; "+
			"publish the module's ModuleReleaseMeta with spec.ocmComponentName, as KLM needs it too", resolve.ModuleName(template))
	}
	if name == "" {
		return nil, Repository{}, invalid("no embedded descriptor, and %s names no OCM component; "+
			"set its spec.ocmComponentName (e.g. kyma-project.io/module/%s), as KLM needs it too", source, resolve.ModuleName(template))
	}
	if err := CheckComponentName(name); err != nil {
		return nil, Repository{}, invalid("%s: %v", source, err)
	}
	version := template.Spec.Version
	if version == "" {
		return nil, Repository{}, invalid("no embedded descriptor and no spec.version; the component version read from %s is the template's spec.version", r.Base)
	}
	if err := checkVersion(version); err != nil {
		return nil, Repository{}, err
	}
	repo := r.Base.repository(name)
	opts, err := r.Registry.RegistryOptions(repo.Host)
	if err != nil {
		return nil, Repository{}, invalid("component %s:%s: %v", name, version, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	stored, err := readComponentVersion(ctx, repo, name, version, opts)
	if err != nil {
		return nil, Repository{}, err
	}
	return stored, repo, nil
}

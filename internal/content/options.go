package content

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// Options configure where module content comes from and how much of it the
// operator takes.
type Options struct {
	// InsecureRegistries are reached over plain HTTP (local registries).
	InsecureRegistries []string
	// CacheDir keeps fetched content across restarts; empty keeps it in
	// memory only.
	CacheDir string
	// MemoryCacheBytes bounds the in-memory content cache.
	MemoryCacheBytes int64

	// AllowedHosts limits content to these hosts and registries (host,
	// host:port or *.domain); empty allows any host with public addresses.
	// Loopback, link-local and private addresses are reached only for
	// hosts listed here or in InsecureRegistries.
	AllowedHosts []string
	// MaxBytes bounds one layer or body; InFlightBytes all downloads in
	// flight together.
	MaxBytes, InFlightBytes int64
	// RenderDeadline, RenderMaxOutputBytes, RenderMaxMemoryBytes and
	// MaxConcurrentRenders bound rendering Helm charts (render.HelmLimits).
	RenderDeadline       time.Duration
	RenderMaxOutputBytes int64
	RenderMaxMemoryBytes int64
	MaxConcurrentRenders int
	// RegistryCredentialsSecret names a kubernetes.io/dockerconfigjson
	// Secret in the control-plane namespace whose credentials the operator
	// uses for OCI registries, read live so that rotation needs no restart.
	// Empty reads every registry anonymously. The operator turns it into
	// the keychain it passes to New, since reading it needs its client.
	RegistryCredentialsSecret string
	// RequireSignatures maps registry hosts (host or host:port, as links
	// name them; a host alone covers all its ports) to the files of the
	// public keys (PEM, cosign.pub) that content from them must be signed
	// with, in cosign's format. Content from other hosts needs no
	// signature.
	RequireSignatures map[string][]string
	// OCIRegistryHost is the registry that holds the OCM component
	// versions of modules whose ModuleTemplates embed no descriptor, as
	// KLM's --oci-registry-host: host[:port][/path], http:// for plain
	// HTTP. ModulesRepositorySubPath (KLM's --modules-repository-subpath)
	// is appended to it. Empty: such templates are refused.
	OCIRegistryHost          string
	ModulesRepositorySubPath string
}

// DefaultOptions are the content defaults; flags override them.
func DefaultOptions() Options {
	return Options{
		MemoryCacheBytes:     256 << 20,
		MaxBytes:             fetch.DefaultMaxBytes,
		InFlightBytes:        fetch.DefaultInFlightBytes,
		RenderDeadline:       render.DefaultRenderDeadline,
		RenderMaxOutputBytes: render.DefaultMaxOutputBytes,
		RenderMaxMemoryBytes: render.DefaultMaxRenderMemoryBytes,
		MaxConcurrentRenders: render.DefaultMaxConcurrentRenders,
	}
}

// BindFlags binds the content limits and the host allow-list to flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.Func("insecure-registries", "Comma-separated registry hosts reached over plain HTTP: host:port, or a host alone for all its ports (written as links write them, IPv6 in brackets). They count as allowed content hosts, on any address.", func(v string) error {
		if strings.TrimSpace(v) == "" {
			return nil
		}
		for i, entry := range strings.Split(v, ",") {
			host, err := fetch.ParseRegistryHost(entry)
			if err != nil {
				return fmt.Errorf("entry %d: %w", i+1, err)
			}
			o.InsecureRegistries = append(o.InsecureRegistries, host)
		}
		return nil
	})
	fs.Func("content-allowed-hosts", "Comma-separated hosts and registries module content may come from (host, host:port or *.domain); empty allows any host with public addresses. Loopback, link-local and private addresses are reached only for hosts listed here or in --insecure-registries.", func(v string) error {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.AllowedHosts = append(o.AllowedHosts, h)
			}
		}
		return nil
	})
	fs.Func("require-signatures", "HOST=PUBKEYFILE: content from registry HOST (host or host:port) is installed only when its OCI artifact carries a cosign signature made with the key whose PEM public key (cosign.pub) is in PUBKEYFILE; repeat the flag for more hosts, or for more keys of one host (any of them will do). Unsigned content from HOST puts its Manifest in Error (SignatureInvalid) and changes nothing installed.", func(v string) error {
		for entry := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(entry) == "" {
				continue
			}
			host, file, err := signing.ParseRequirement(entry)
			if err != nil {
				return err
			}
			if o.RequireSignatures == nil {
				o.RequireSignatures = map[string][]string{}
			}
			o.RequireSignatures[host] = append(o.RequireSignatures[host], file)
		}
		return nil
	})
	fs.StringVar(&o.OCIRegistryHost, "oci-registry-host", o.OCIRegistryHost, "Registry holding the OCM component versions of modules published for KLM, as KLM's flag of that name: host[:port][/path], http:// for plain HTTP. A ModuleTemplate without spec.descriptor and spec.resources is read from <this>/component-descriptors/<ModuleReleaseMeta spec.ocmComponentName>:<spec.version>. Credentials come from --registry-credentials-secret; the host must be an allowed content host. Empty: such templates are refused.")
	fs.StringVar(&o.ModulesRepositorySubPath, "modules-repository-subpath", o.ModulesRepositorySubPath, "Repository path appended to --oci-registry-host, as KLM's flag of that name.")
	fs.Int64Var(&o.MaxBytes, "content-max-bytes", o.MaxBytes, "Largest module content layer or http(s) body, in bytes; larger ones are refused before or while they download.")
	fs.Int64Var(&o.InFlightBytes, "content-inflight-bytes", o.InFlightBytes, "Bytes all content downloads in flight may hold together; more wait their turn.")
	fs.DurationVar(&o.RenderDeadline, "helm-render-deadline", o.RenderDeadline, "Longest a Helm chart may take to render; its render process is then killed and its Manifest goes to Error.")
	fs.Int64Var(&o.RenderMaxOutputBytes, "helm-max-output-bytes", o.RenderMaxOutputBytes, "Largest rendered output of a Helm chart, in bytes: its templates' text, and the objects its render process sends back.")
	fs.Int64Var(&o.RenderMaxMemoryBytes, "helm-max-render-memory-bytes", o.RenderMaxMemoryBytes, "Memory one Helm render may use, in bytes, at least 67108864 (64 MiB), on top of the ~120 MiB its process (a copy of the operator) maps as it starts; a render that needs more is killed and its Manifest goes to Error.")
	fs.IntVar(&o.MaxConcurrentRenders, "helm-max-concurrent-renders", o.MaxConcurrentRenders, "Helm charts rendered at once, each in a process of its own that uses about one core.")
}

// validateRender checks the render limits that a mistake would turn into
// a refusal of every chart, kept in each Manifest's status.
func (o *Options) validateRender() error {
	if o.RenderMaxMemoryBytes != 0 && o.RenderMaxMemoryBytes < render.MinRenderMemoryBytes {
		return fmt.Errorf("--helm-max-render-memory-bytes is %d, less than the %d bytes (%d MiB) a render needs for a small chart",
			o.RenderMaxMemoryBytes, render.MinRenderMemoryBytes, render.MinRenderMemoryBytes>>20)
	}
	if o.RenderDeadline < 0 || o.RenderMaxOutputBytes < 0 || o.MaxConcurrentRenders < 0 {
		return errors.New("--helm-render-deadline, --helm-max-output-bytes and --helm-max-concurrent-renders must not be negative")
	}
	return nil
}

// registryBase reads --oci-registry-host and --modules-repository-subpath.
// The registry must be an allowed content host: with
// --content-allowed-hosts set, it must be listed there or in
// --insecure-registries, also when http:// makes it a plain-HTTP registry.
func (o *Options) registryBase() (*ocm.Base, error) {
	if strings.TrimSpace(o.OCIRegistryHost) == "" {
		if strings.TrimSpace(o.ModulesRepositorySubPath) != "" {
			return nil, errors.New("--modules-repository-subpath is set without --oci-registry-host")
		}
		return nil, nil //nolint:nilnil // no registry configured is no error
	}
	base, err := ocm.ParseBase(o.OCIRegistryHost, o.ModulesRepositorySubPath)
	if err != nil {
		return nil, fmt.Errorf("--oci-registry-host: %w", err)
	}
	host, err := fetch.ParseRegistryHost(base.Host)
	if err != nil {
		return nil, fmt.Errorf("--oci-registry-host: %w", err)
	}
	base.Host = host
	if err := fetch.CheckAllowed(o.AllowedHosts, o.InsecureRegistries, host); err != nil {
		return nil, fmt.Errorf("--oci-registry-host %s: %w; list the registry there", o.OCIRegistryHost, err)
	}
	return &base, nil
}

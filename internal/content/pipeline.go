// Package content turns what a ModuleTemplate links into the objects the
// operator applies: it pins links by digest (fetch), downloads them (fetch),
// renders raw manifests and Helm charts (render), and labels and namespaces
// the objects for the runtime (transform). The controllers see only
// Pipeline's two methods, each through an interface of their own.
package content

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// Pipeline pins, fetches, renders and transforms module content. Its errors
// are bounded in length, as they reach status and events.
type Pipeline struct {
	fetcher *fetch.Fetcher
	helm    *render.HelmRenderer
	// maxUnpacked bounds a packed raw manifest once unpacked.
	maxUnpacked int64
	// registryBase is --oci-registry-host; nil when not set.
	registryBase *ocm.Base
}

// New builds the pipeline; keychain supplies registry credentials, nil
// reads every registry anonymously.
func New(opts Options, keychain authn.Keychain) (*Pipeline, error) {
	if !render.RendersInProcesses() {
		// Fail at start, not at the first chart: without it a render
		// process would run this binary's main instead.
		return nil, render.ErrNoRenderProcess
	}
	if err := opts.validateRender(); err != nil {
		return nil, err
	}
	base, err := opts.registryBase()
	if err != nil {
		return nil, err
	}
	insecure := opts.InsecureRegistries
	if base != nil && base.PlainHTTP {
		// http:// means plain HTTP, as in KLM's flag; the host is allowed
		// already (registryBase).
		insecure = append(slices.Clip(insecure), base.Host)
	}
	fetchOpts := []fetch.Option{
		fetch.WithInsecureRegistries(insecure...),
		fetch.WithAllowedHosts(opts.AllowedHosts...),
		fetch.WithMaxBytes(opts.MaxBytes),
		fetch.WithInFlightBytes(opts.InFlightBytes),
	}
	if keychain != nil {
		fetchOpts = append(fetchOpts, fetch.WithKeychain(keychain))
	}
	if opts.MemoryCacheBytes > 0 {
		fetchOpts = append(fetchOpts, fetch.WithMemoryCacheSize(opts.MemoryCacheBytes))
	}
	if opts.CacheDir != "" {
		fetchOpts = append(fetchOpts, fetch.WithDiskCache(opts.CacheDir))
	}
	if len(opts.RequireSignatures) > 0 {
		policy, err := signing.LoadPolicy(opts.RequireSignatures)
		if err != nil {
			return nil, fmt.Errorf("--require-signatures: %w", err)
		}
		fetchOpts = append(fetchOpts, fetch.WithSignatures(policy))
	}
	fetcher, err := fetch.New(fetchOpts...)
	if err != nil {
		return nil, fmt.Errorf("creating content fetcher: %w", err)
	}
	helm := render.NewHelmRenderer(render.HelmLimits{
		Deadline:       opts.RenderDeadline,
		MaxOutputBytes: opts.RenderMaxOutputBytes,
		MaxMemoryBytes: opts.RenderMaxMemoryBytes,
		MaxConcurrent:  opts.MaxConcurrentRenders,
	})
	return &Pipeline{fetcher: fetcher, helm: helm, maxUnpacked: opts.RenderMaxOutputBytes, registryBase: base}, nil
}

// Descriptors is the resolver of the content of ModuleTemplates published
// for KLM (internal/ocm): from an embedded OCM component descriptor, or,
// with --oci-registry-host, from the component version in that registry,
// whose component components names. One resolver serves every caller.
func (p *Pipeline) Descriptors(components ocm.ComponentNames) *ocm.Resolver {
	return &ocm.Resolver{Registry: p, Base: p.registryBase, Components: components}
}

// RegistryOptions are the options to read the registry at host as content
// is read (fetch.Fetcher.RegistryOptions), for the OCM descriptor reader.
func (p *Pipeline) RegistryOptions(host string) ([]ociartifact.Option, error) {
	return p.fetcher.RegistryOptions(host)
}

// Pin pins a template's content link by digest, so that every runtime gets
// the same bytes whatever later happens to tags and URLs.
func (p *Pipeline) Pin(ctx context.Context, res v1beta2.ContentResource) (v1beta2.ContentResource, error) {
	pinned, err := p.fetcher.Pin(ctx, res)
	return pinned, bounded(err)
}

// Render fetches the Manifest's content, renders it (CRDs first, so that
// they are applied before their instances) and labels and namespaces it for
// the runtime: objects that name no namespace go to syncNamespace when
// namespaced says their kind is namespaced there (transform.RESTMapperScope).
// A Helm render stopped at a limit is a *render.RefusedError, whose Refusal
// belongs in the Manifest's status.renderRefusal: the chart is then refused
// at once, also after a restart, until it or its values change.
func (p *Pipeline) Render(ctx context.Context, manifest *v1beta2.Manifest, syncNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) ([]*unstructured.Unstructured, error) {
	objs, err := p.render(ctx, manifest, syncNamespace, namespaced)
	return objs, bounded(err)
}

func (p *Pipeline) render(ctx context.Context, manifest *v1beta2.Manifest, syncNamespace string, namespaced transform.ScopeFunc) ([]*unstructured.Unstructured, error) {
	var crds, rest []*unstructured.Unstructured
	for _, res := range manifest.Spec.Resources {
		data, err := p.fetcher.Fetch(ctx, res.Link)
		if err != nil {
			return nil, &PartError{Stage: StageFetch, Part: res.Name, Err: err}
		}
		objs, err := p.renderResource(ctx, res.Name, data, manifest, syncNamespace)
		if err != nil {
			return nil, &PartError{Stage: StageRender, Part: res.Name, Err: err}
		}
		if strings.EqualFold(res.Name, v1beta2.CRDsResourceName) {
			crds = append(crds, objs...)
		} else {
			rest = append(rest, objs...)
		}
	}
	objects := append(crds, rest...) //nolint:gocritic // crds is ours to extend
	if err := transform.Objects(objects, transform.Options{
		KymaName:         manifest.Labels[v1beta2.KymaNameLabel],
		ModuleName:       manifest.Spec.ModuleName,
		Manifest:         types.NamespacedName{Namespace: manifest.Namespace, Name: manifest.Name},
		Debug:            manifest.Spec.Debug,
		DefaultNamespace: syncNamespace,
		Scope:            namespaced,
		LocalizedImages:  manifest.Spec.LocalizedImages,
	}); err != nil {
		return nil, err
	}
	return objects, nil
}

// renderResource renders one content part by its resource name: CRDs and
// raw manifests as YAML, a Helm chart with the Manifest's values, released
// under the module's name. Other names are informational for this operator
// and give no objects.
func (p *Pipeline) renderResource(ctx context.Context, name string, data []byte, manifest *v1beta2.Manifest, syncNamespace string) ([]*unstructured.Unstructured, error) {
	switch {
	case strings.EqualFold(name, v1beta2.CRDsResourceName), strings.EqualFold(name, v1beta2.RawManifestResourceName):
		// Modules published for KLM pack their manifests in a tar, often
		// gzip-compressed; plain YAML passes through.
		unpacked, err := render.Unpack(data, p.maxUnpacked)
		if err != nil {
			return nil, err
		}
		return render.Raw(unpacked)
	case strings.EqualFold(name, v1beta2.HelmChartResourceName):
		return p.helm.Render(ctx, data, render.HelmOptions{
			ReleaseName: manifest.Spec.ModuleName,
			Namespace:   syncNamespace,
			Values:      manifest.Spec.Values,
		}, manifest.Status.RenderRefusal)
	}
	return nil, nil
}

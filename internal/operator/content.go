package operator

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/authn"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
)

// content joins fetching, rendering and transforming into what the Kyma
// controller (pinning) and the Manifest controller (rendering) need.
type content struct {
	fetcher *fetch.Fetcher
	helm    *render.HelmRenderer
}

// maxErrorText bounds a content error as it reaches a Manifest's or
// Kyma's status and events: parts of it (links, registry error codes,
// template errors) are chosen by module teams and registries.
const maxErrorText = 1024

// BindFlags binds the content limits and the host allow-list to flags.
func (o *ContentOptions) BindFlags(fs *flag.FlagSet) {
	fs.Func("content-allowed-hosts", "Comma-separated hosts and registries module content may come from (host, host:port or *.domain); empty allows any host with public addresses. Loopback, link-local and private addresses are reached only for hosts listed here or in --insecure-registries.", func(v string) error {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.AllowedHosts = append(o.AllowedHosts, h)
			}
		}
		return nil
	})
	fs.Int64Var(&o.MaxBytes, "content-max-bytes", o.MaxBytes, "Largest module content layer or http(s) body, in bytes; larger ones are refused before or while they download.")
	fs.Int64Var(&o.InFlightBytes, "content-inflight-bytes", o.InFlightBytes, "Bytes all content downloads in flight may hold together; more wait their turn.")
	fs.DurationVar(&o.RenderDeadline, "helm-render-deadline", o.RenderDeadline, "Longest a Helm chart may take to render before its Manifest goes to Error.")
	fs.Int64Var(&o.RenderMaxOutputBytes, "helm-max-output-bytes", o.RenderMaxOutputBytes, "Largest rendered output of a Helm chart, in bytes.")
	fs.IntVar(&o.MaxConcurrentRenders, "helm-max-concurrent-renders", o.MaxConcurrentRenders, "Helm charts rendered at once, including renders past their deadline that still run.")
}

func newContent(opts ContentOptions, keychain authn.Keychain) (*content, error) {
	fetchOpts := []fetch.Option{
		fetch.WithInsecureRegistries(opts.InsecureRegistries...),
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
	fetcher, err := fetch.New(fetchOpts...)
	if err != nil {
		return nil, fmt.Errorf("creating content fetcher: %w", err)
	}
	helm := render.NewHelmRenderer(render.HelmLimits{
		Deadline:       opts.RenderDeadline,
		MaxOutputBytes: opts.RenderMaxOutputBytes,
		MaxConcurrent:  opts.MaxConcurrentRenders,
	})
	return &content{fetcher: fetcher, helm: helm}, nil
}

// Pin pins a template's content link by digest.
func (c *content) Pin(ctx context.Context, res v1beta2.ContentResource) (v1beta2.ContentResource, error) {
	pinned, err := c.fetcher.Pin(ctx, res)
	return pinned, bounded(err)
}

// Render fetches the Manifest's content, renders it (CRDs first) and labels
// and namespaces it for the runtime. Its errors are bounded in length.
func (c *content) Render(ctx context.Context, manifest *v1beta2.Manifest, syncNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) ([]*unstructured.Unstructured, error) {
	objs, err := c.render(ctx, manifest, syncNamespace, namespaced)
	return objs, bounded(err)
}

func (c *content) render(ctx context.Context, manifest *v1beta2.Manifest, syncNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) ([]*unstructured.Unstructured, error) {
	var crds, rest []*unstructured.Unstructured
	for _, res := range manifest.Spec.Resources {
		data, err := c.fetcher.Fetch(ctx, res.Link)
		if err != nil {
			return nil, fmt.Errorf("fetching %s: %w", res.Name, err)
		}
		switch {
		case strings.EqualFold(res.Name, v1beta2.CRDsResourceName):
			objs, err := render.Raw(data)
			if err != nil {
				return nil, fmt.Errorf("rendering %s: %w", res.Name, err)
			}
			crds = append(crds, objs...)
		case strings.EqualFold(res.Name, v1beta2.RawManifestResourceName):
			objs, err := render.Raw(data)
			if err != nil {
				return nil, fmt.Errorf("rendering %s: %w", res.Name, err)
			}
			rest = append(rest, objs...)
		case strings.EqualFold(res.Name, v1beta2.HelmChartResourceName):
			objs, err := c.helm.Render(ctx, data, render.HelmOptions{
				ReleaseName: manifest.Spec.ModuleName,
				Namespace:   syncNamespace,
				Values:      manifest.Spec.Values,
			})
			if err != nil {
				return nil, fmt.Errorf("rendering %s: %w", res.Name, err)
			}
			rest = append(rest, objs...)
		}
		// Other resource names are informational for this operator.
	}
	objects := append(crds, rest...) //nolint:gocritic // crds is ours to extend
	if err := transform.Objects(objects, transform.Options{
		KymaName:         manifest.Labels[v1beta2.KymaNameLabel],
		ModuleName:       manifest.Spec.ModuleName,
		Manifest:         types.NamespacedName{Namespace: manifest.Namespace, Name: manifest.Name},
		Debug:            manifest.Spec.Debug,
		DefaultNamespace: syncNamespace,
		Scope:            namespaced,
	}); err != nil {
		return nil, err
	}
	return objects, nil
}

// bounded cuts an error's text to maxErrorText, keeping what it wraps.
func bounded(err error) error {
	if err == nil || len(err.Error()) <= maxErrorText {
		return err
	}
	return &boundedError{err: err}
}

type boundedError struct{ err error }

func (e *boundedError) Error() string {
	text := e.err.Error()
	cut := maxErrorText - len(truncatedMark)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + truncatedMark
}

func (e *boundedError) Unwrap() error { return e.err }

const truncatedMark = " … (truncated)"

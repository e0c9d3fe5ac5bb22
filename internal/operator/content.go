package operator

import (
	"context"
	"fmt"
	"strings"

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
}

func newContent(opts ContentOptions, keychain authn.Keychain) (*content, error) {
	fetchOpts := []fetch.Option{fetch.WithInsecureRegistries(opts.InsecureRegistries...)}
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
	return &content{fetcher: fetcher}, nil
}

// Pin pins a template's content link by digest.
func (c *content) Pin(ctx context.Context, res v1beta2.ContentResource) (v1beta2.ContentResource, error) {
	return c.fetcher.Pin(ctx, res)
}

// Render fetches the Manifest's content, renders it (CRDs first) and labels
// and namespaces it for the runtime.
func (c *content) Render(ctx context.Context, manifest *v1beta2.Manifest, syncNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) ([]*unstructured.Unstructured, error) {
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
			objs, err := render.HelmChart(data, render.HelmOptions{
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

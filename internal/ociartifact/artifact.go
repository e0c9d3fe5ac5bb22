// Package ociartifact stores a module's content in an OCI registry as one
// artifact with a layer per part (raw manifest, CRDs, default CR, Helm chart)
// and reads a part back by digest.
//
// Content is always addressed by digest so that every runtime in a rollout
// gets the same bytes, whatever happens to tags afterwards.
package ociartifact

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the parts of a module artifact. The Helm chart uses Helm's
// own media type so that Helm tooling recognises the layer.
const (
	ArtifactType         types.MediaType = "application/vnd.runtime-fleet.module.v1+json"
	RawManifestMediaType types.MediaType = "application/vnd.runtime-fleet.module.raw-manifest.v1+yaml"
	CRDsMediaType        types.MediaType = "application/vnd.runtime-fleet.module.crds.v1+yaml"
	DefaultCRMediaType   types.MediaType = "application/vnd.runtime-fleet.module.default-cr.v1+yaml"
	HelmChartMediaType   types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	titleAnnotation                      = "org.opencontainers.image.title"
	linkScheme                           = "oci://"
)

// Layer is one part of a module's content.
type Layer struct {
	// Name says which part it is, e.g. "rawManifest", "crds", "helmChart";
	// it is stored as the layer's title annotation.
	Name      string
	MediaType types.MediaType
	Data      []byte
}

// Artifact is a pushed module artifact.
type Artifact struct {
	// Ref is the artifact's manifest by digest: host/repo@sha256:….
	Ref string
	// Links maps each layer name to its digest-pinned link,
	// oci://host/repo@sha256:…, the form ModuleTemplate resources use.
	Links map[string]string
}

// Push writes the layers as one OCI artifact to repo (host/path[:tag]) and
// returns digest-pinned references to it and to each layer.
func Push(ctx context.Context, repo string, layers []Layer, opts ...Option) (Artifact, error) {
	o := newOptions(opts)
	ref, err := name.ParseReference(repo, o.nameOptions...)
	if err != nil {
		return Artifact{}, fmt.Errorf("parsing repository %q: %w", repo, err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ArtifactType)
	links := make(map[string]string, len(layers))
	for _, l := range layers {
		if l.Name == "" {
			return Artifact{}, errors.New("every layer needs a name")
		}
		layer := static.NewLayer(l.Data, l.MediaType)
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:       layer,
			Annotations: map[string]string{titleAnnotation: l.Name},
		})
		if err != nil {
			return Artifact{}, fmt.Errorf("adding layer %q: %w", l.Name, err)
		}
		digest, err := layer.Digest()
		if err != nil {
			return Artifact{}, fmt.Errorf("digesting layer %q: %w", l.Name, err)
		}
		links[l.Name] = linkScheme + ref.Context().Digest(digest.String()).String()
	}

	if err := remote.Write(ref, img, o.remoteOptions(ctx)...); err != nil {
		return Artifact{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Artifact{}, fmt.Errorf("digesting artifact: %w", err)
	}
	return Artifact{Ref: ref.Context().Digest(digest.String()).String(), Links: links}, nil
}

// FetchLayer reads the layer a digest-pinned link (oci://host/repo@sha256:…)
// points to. The registry's answer is verified against the digest. Errors
// carry the registry's status and error codes, never its messages or
// bodies, which the registry chooses.
func FetchLayer(ctx context.Context, link string, opts ...Option) ([]byte, error) {
	o := newOptions(opts)
	digest, err := ParseLink(link, o.nameOptions...)
	if err != nil {
		return nil, err
	}
	layer, err := remote.Layer(digest, o.remoteOptions(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", link, withoutBody(err))
	}
	data, err := readLayer(ctx, layer, o)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", link, withoutBody(err))
	}
	return data, nil
}

// ParseLink parses an oci:// link that is pinned by digest.
func ParseLink(link string, opts ...name.Option) (name.Digest, error) {
	rest, ok := strings.CutPrefix(link, linkScheme)
	if !ok {
		return name.Digest{}, fmt.Errorf("link %q: want oci://host/repo@sha256:<digest>", link)
	}
	digest, err := name.NewDigest(rest, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("link %q is not pinned by digest: %w", link, err)
	}
	return digest, nil
}

// ResolveTag turns oci://host/repo:tag into the digest-pinned link of the
// artifact's layer with the given name.
func ResolveTag(ctx context.Context, link, layerName string, opts ...Option) (string, error) {
	o := newOptions(opts)
	rest, ok := strings.CutPrefix(link, linkScheme)
	if !ok {
		return "", fmt.Errorf("link %q: want oci://host/repo:tag", link)
	}
	ref, err := name.ParseReference(rest, o.nameOptions...)
	if err != nil {
		return "", fmt.Errorf("parsing %q: %w", link, err)
	}
	manifest, err := remote.Get(ref, o.remoteOptions(ctx)...)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", link, withoutBody(err))
	}
	parsed, err := v1.ParseManifest(strings.NewReader(string(manifest.Manifest)))
	if err != nil {
		return "", fmt.Errorf("reading manifest of %s: %w", link, err)
	}
	for _, l := range parsed.Layers {
		if l.Annotations[titleAnnotation] == layerName {
			if o.maxBytes > 0 && l.Size > o.maxBytes {
				return "", fmt.Errorf("artifact %s, layer %q: %w: its descriptor declares %d bytes, the limit is %d", link, layerName, ErrTooLarge, l.Size, o.maxBytes)
			}
			return linkScheme + ref.Context().Digest(l.Digest.String()).String(), nil
		}
	}
	return "", fmt.Errorf("artifact %s has no layer %q", link, layerName)
}

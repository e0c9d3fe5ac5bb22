package ociartifact

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NewImage lays the layers out as a module artifact, the same one Push
// writes, without writing it anywhere: `lmctl module build` stores it in an
// OCI layout and `lmctl module push` sends it later (PushImage), so that what
// was built is what is pushed, byte for byte.
func NewImage(layers []Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ArtifactType)
	for _, l := range layers {
		if l.Name == "" {
			return nil, errors.New("every layer needs a name")
		}
		var err error
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:       static.NewLayer(l.Data, l.MediaType),
			Annotations: map[string]string{titleAnnotation: l.Name},
		})
		if err != nil {
			return nil, fmt.Errorf("adding layer %q: %w", l.Name, err)
		}
	}
	return img, nil
}

// PushImage writes a module artifact made by NewImage to repo
// (host/path[:tag]) and returns digest-pinned references to it and to each
// layer, by the layers' titles.
func PushImage(ctx context.Context, repo string, img v1.Image, opts ...Option) (Artifact, error) {
	o := newOptions(opts)
	ref, err := name.ParseReference(repo, o.nameOptions...)
	if err != nil {
		return Artifact{}, fmt.Errorf("parsing repository %q: %w", repo, err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return Artifact{}, fmt.Errorf("reading the artifact's manifest: %w", err)
	}
	links := make(map[string]string, len(manifest.Layers))
	for _, l := range manifest.Layers {
		title := l.Annotations[titleAnnotation]
		if title == "" {
			return Artifact{}, fmt.Errorf("layer %s has no title: not a module artifact", l.Digest)
		}
		links[title] = linkScheme + ref.Context().Digest(l.Digest.String()).String()
	}
	if err := remote.Write(ref, img, o.remoteOptions(ctx)...); err != nil {
		return Artifact{}, fmt.Errorf("pushing %s: %w", ref, withoutBody(err))
	}
	digest, err := img.Digest()
	if err != nil {
		return Artifact{}, fmt.Errorf("digesting artifact: %w", err)
	}
	return Artifact{Ref: ref.Context().Digest(digest.String()).String(), Links: links}, nil
}

// LayerData returns the content of the artifact's layer titled name, nil
// when it has none.
func LayerData(img v1.Image, layerName string) ([]byte, error) {
	manifest, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	for _, l := range manifest.Layers {
		if l.Annotations[titleAnnotation] != layerName {
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return nil, err
		}
		rc, err := layer.Compressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	return nil, nil
}

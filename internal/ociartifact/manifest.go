package ociartifact

import (
	"bytes"
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// maxManifestBytes bounds an image manifest read by ReadManifest: manifests
// list layers, a few kilobytes each; the distribution spec asks registries
// to accept at least 4 MiB.
const maxManifestBytes = 4 << 20

// ReadManifest reads the OCI image manifest that ref (host/repo:tag or
// host/repo@sha256:…) names, for formats that keep their own structure in
// one, such as OCM component versions. Errors carry the registry's status
// and error codes, never its messages or bodies.
func ReadManifest(ctx context.Context, ref string, opts ...Option) (*v1.Manifest, error) {
	o := newOptions(opts)
	parsed, err := name.ParseReference(ref, o.nameOptions...)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", ref, err)
	}
	desc, err := remote.Get(parsed, o.remoteOptions(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", ref, withoutBody(err))
	}
	if len(desc.Manifest) > maxManifestBytes {
		return nil, fmt.Errorf("reading manifest %s: %w: %d bytes, the limit is %d", ref, ErrTooLarge, len(desc.Manifest), maxManifestBytes)
	}
	manifest, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", ref, err)
	}
	if manifest.MediaType == "" {
		manifest.MediaType = desc.MediaType
	}
	return manifest, nil
}

package ocm

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// Media types of the OCIRegistry mapping: the component version's config
// and its descriptor layer (layer 0), in OCM's names and in the names of
// its predecessor, which registries still hold.
const (
	ConfigMediaType          = "application/vnd.ocm.software.component.config.v1+json"
	legacyConfigMediaType    = "application/vnd.gardener.cloud.cnudie.component.config.v1+json"
	DescriptorTarMediaType   = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar"
	legacyDescriptorTarType  = "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml+tar"
	descriptorJSONMediaType  = "application/vnd.ocm.software.component-descriptor.v2+json"
	descriptorYAMLMediaType  = "application/vnd.ocm.software.component-descriptor.v2+yaml"
	legacyDescriptorJSONType = "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+json"
	descriptorFileName       = "component-descriptor.yaml"
	maxDescriptorBytes       = 4 << 20
)

// readComponentVersion reads a component version's descriptor from its
// repository: the OCI manifest tagged with the version, and its descriptor
// layer (a tar holding component-descriptor.yaml, or the descriptor
// itself).
func readComponentVersion(ctx context.Context, repo Repository, name, version string, opts []ociartifact.Option) (*Descriptor, error) {
	ref := repo.Name + ":" + tagOf(version)
	manifest, err := ociartifact.ReadManifest(ctx, ref, opts...)
	if err != nil {
		var rerr *ociartifact.RegistryError
		if errors.As(err, &rerr) && rerr.StatusCode == http.StatusNotFound {
			return nil, invalid("component version %s:%s is not in the registry (%s): %v", name, version, ref, err)
		}
		return nil, fmt.Errorf("reading component version %s:%s: %w", name, version, err)
	}
	switch manifest.Config.MediaType {
	case ConfigMediaType, legacyConfigMediaType:
	default:
		return nil, invalid("%s is not an OCM component version: its config has media type %q, want %s", ref, manifest.Config.MediaType, ConfigMediaType)
	}
	layer, ok := descriptorLayer(manifest)
	if !ok {
		return nil, invalid("component version %s:%s (%s) has no component descriptor layer (%s)", name, version, ref, DescriptorTarMediaType)
	}
	if layer.Size > maxDescriptorBytes {
		return nil, invalid("component version %s:%s: its descriptor layer declares %d bytes, the limit is %d", name, version, layer.Size, maxDescriptorBytes)
	}
	data, err := ociartifact.FetchLayer(ctx, "oci://"+repo.Name+"@"+layer.Digest.String(), opts...)
	if err != nil {
		return nil, fmt.Errorf("reading the descriptor of component version %s:%s: %w", name, version, err)
	}
	raw := data
	if isTar(layer.MediaType) {
		if raw, err = descriptorFromTar(data); err != nil {
			return nil, invalid("component version %s:%s: descriptor layer: %v", name, version, err)
		}
	}
	d, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("component version %s:%s in %s: %w", name, version, ref, err)
	}
	if d.Component.Name != name || d.Component.Version != version {
		return nil, invalid("%s holds component version %s, not %s:%s", ref, d.Component, name, version)
	}
	return d, nil
}

// descriptorLayer finds the descriptor layer: layer 0 by the specification,
// recognised by its media type wherever it is.
func descriptorLayer(m *v1.Manifest) (v1.Descriptor, bool) {
	for _, l := range m.Layers {
		switch l.MediaType {
		case DescriptorTarMediaType, legacyDescriptorTarType, descriptorJSONMediaType, descriptorYAMLMediaType, legacyDescriptorJSONType:
			return l, true
		}
	}
	return v1.Descriptor{}, false
}

func isTar(mediaType types.MediaType) bool {
	switch mediaType {
	case DescriptorTarMediaType, legacyDescriptorTarType:
		return true
	}
	return false
}

// descriptorFromTar returns the component-descriptor.yaml of a descriptor
// layer's tar.
func descriptorFromTar(data []byte) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the tar holds no %s", descriptorFileName)
		}
		if err != nil {
			return nil, fmt.Errorf("reading the tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg || path.Clean(h.Name) != descriptorFileName {
			continue
		}
		return io.ReadAll(io.LimitReader(tr, maxDescriptorBytes))
	}
}

// Package ocmtest publishes OCM component versions to an OCI registry the
// way the OCM specification's OCIRegistry mapping lays them out and Kyma's
// module tooling fills them (component kyma-project.io/module/<name>,
// raw-manifest and default-cr as localBlob layers), for tests and the dev
// environment. It writes only what the specification requires; it is not
// a general OCM writer.
package ocmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// The OCIRegistry mapping's media types, spelled out here rather than taken
// from package ocm, so that the writer checks the reader.
const (
	configMediaType     = "application/vnd.ocm.software.component.config.v1+json"
	descriptorMediaType = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar"
)

// Blob is a resource stored as a localBlob layer of the component version.
type Blob struct {
	// Name is the resource's name, e.g. raw-manifest or default-cr.
	Name string
	// Type is the resource's OCM type, e.g. directory or yaml.
	Type      string
	MediaType string
	Data      []byte
}

// ComponentVersion is what to publish.
type ComponentVersion struct {
	// Name is the component's name, e.g. kyma-project.io/module/shop.
	Name, Version string
	Blobs         []Blob
	// External resources are listed in the descriptor as they are (e.g.
	// the manager image, an ociArtifact), with no layer.
	External []map[string]any
}

// Push stores cv in the OCM repository at base (host[:port][/path]): the
// manifest tagged with the version in base/component-descriptors/<name>,
// with the component config, the descriptor layer (a tar holding
// component-descriptor.yaml) as layer 0 and each blob as a further layer.
// It returns the descriptor as JSON, as a KLM ModuleTemplate embeds it in
// spec.descriptor.
func Push(ctx context.Context, base string, cv ComponentVersion, opts ...name.Option) ([]byte, error) {
	repo, err := name.NewRepository(base+"/component-descriptors/"+cv.Name, opts...)
	if err != nil {
		return nil, err
	}
	remoteOpts := []remote.Option{remote.WithContext(ctx)}

	var layers []v1.Descriptor
	resources := make([]any, 0, len(cv.Blobs)+len(cv.External))
	for _, b := range cv.Blobs {
		layer := static.NewLayer(b.Data, types.MediaType(b.MediaType))
		if err := remote.WriteLayer(repo, layer, remoteOpts...); err != nil {
			return nil, fmt.Errorf("writing blob %s: %w", b.Name, err)
		}
		desc, err := descriptorOf(layer, b.MediaType)
		if err != nil {
			return nil, err
		}
		layers = append(layers, desc)
		resources = append(resources, map[string]any{
			"name": b.Name, "type": b.Type, "relation": "local", "version": cv.Version,
			"access": map[string]any{"type": "localBlob", "localReference": desc.Digest.String(), "mediaType": b.MediaType},
			"digest": map[string]any{"hashAlgorithm": "SHA-256", "normalisationAlgorithm": "genericBlobDigest/v1", "value": desc.Digest.Hex},
		})
	}
	for _, e := range cv.External {
		resources = append(resources, e)
	}
	descriptor := map[string]any{
		"meta": map[string]any{"schemaVersion": "v2"},
		"component": map[string]any{
			"name": cv.Name, "version": cv.Version, "provider": "kyma-project.io",
			"creationTime":        time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339),
			"componentReferences": []any{},
			"sources":             []any{},
			"repositoryContexts":  []any{repositoryContext(repo.RegistryStr(), base)},
			"resources":           resources,
		},
	}
	descriptorYAML, err := yaml.Marshal(descriptor)
	if err != nil {
		return nil, err
	}
	tarred, err := Tar(map[string][]byte{"component-descriptor.yaml": descriptorYAML})
	if err != nil {
		return nil, err
	}
	descLayer := static.NewLayer(tarred, descriptorMediaType)
	if err := remote.WriteLayer(repo, descLayer, remoteOpts...); err != nil {
		return nil, fmt.Errorf("writing the descriptor layer: %w", err)
	}
	descDesc, err := descriptorOf(descLayer, descriptorMediaType)
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(map[string]any{"componentDescriptorLayer": descDesc})
	if err != nil {
		return nil, err
	}
	configLayer := static.NewLayer(config, configMediaType)
	if err := remote.WriteLayer(repo, configLayer, remoteOpts...); err != nil {
		return nil, fmt.Errorf("writing the config: %w", err)
	}
	configDesc, err := descriptorOf(configLayer, configMediaType)
	if err != nil {
		return nil, err
	}
	manifest := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        configDesc,
		Layers:        append([]v1.Descriptor{descDesc}, layers...),
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	tag := repo.Tag(ocmTag(cv.Version))
	if err := remote.Put(tag, rawManifest{raw: raw, mediaType: types.OCIManifestSchema1}, remoteOpts...); err != nil {
		return nil, fmt.Errorf("writing the component version's manifest: %w", err)
	}
	return json.Marshal(descriptor)
}

// repositoryContext is the OCIRegistry context KLM's tooling writes:
// baseUrl the registry, subPath the rest of base.
func repositoryContext(registry, base string) map[string]any {
	rc := map[string]any{"type": "OCIRegistry", "componentNameMapping": "urlPath", "baseUrl": registry}
	if rest := base[len(registry):]; len(rest) > 1 {
		rc["subPath"] = rest[1:]
	}
	return rc
}

func ocmTag(version string) string {
	for i := range version {
		if version[i] == '+' {
			return version[:i] + ".build-" + version[i+1:]
		}
	}
	return version
}

func descriptorOf(layer v1.Layer, mediaType string) (v1.Descriptor, error) {
	digest, err := layer.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := layer.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: types.MediaType(mediaType), Digest: digest, Size: size}, nil
}

type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// Tar packs files (name → content) into a tar, names sorted.
func Tar(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TarGz packs files into a gzip-compressed tar, as modulectl packs a
// module's manifest directory (application/x-tgz).
func TarGz(files map[string][]byte) ([]byte, error) {
	t, err := Tar(files)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(t); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

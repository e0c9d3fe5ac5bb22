package ociartifact

import "github.com/runtime-fleet/lifecycle-manager/api/v1beta2"

// Module is the content of one module version, as a module team publishes it.
// Empty parts are left out of the artifact.
type Module struct {
	RawManifest []byte
	CRDs        []byte
	DefaultCR   []byte
	HelmChart   []byte // a packaged chart (.tgz)
}

// DefaultCRLayerName names the layer holding a module's default custom
// resource; ModuleTemplates carry it in spec.data instead, so it is not one
// of the resource names a template links.
const DefaultCRLayerName = "defaultCR"

// Layers returns the module's parts as artifact layers, named as
// ModuleTemplate spec.resources names them.
func (m Module) Layers() []Layer {
	parts := []Layer{
		{Name: v1beta2.RawManifestResourceName, MediaType: RawManifestMediaType, Data: m.RawManifest},
		{Name: v1beta2.CRDsResourceName, MediaType: CRDsMediaType, Data: m.CRDs},
		{Name: DefaultCRLayerName, MediaType: DefaultCRMediaType, Data: m.DefaultCR},
		{Name: v1beta2.HelmChartResourceName, MediaType: HelmChartMediaType, Data: m.HelmChart},
	}
	layers := parts[:0]
	for _, p := range parts {
		if len(p.Data) > 0 {
			layers = append(layers, p)
		}
	}
	return layers
}

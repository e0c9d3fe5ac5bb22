package module

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// Build renders and packs the module version that cfg (read from fsys, the
// module's directory) describes: a kustomization is rendered and split into
// its CRDs and the rest; a chart is packaged as `helm package` would (and
// rendered with its defaults, to fail here rather than in every runtime);
// the default CR is checked to be one object.
func Build(fsys fs.FS, cfg *Config) (ociartifact.Module, error) {
	var m ociartifact.Module
	switch {
	case cfg.Kustomize != "":
		objs, err := renderKustomize(fsys, path.Clean(cfg.Kustomize))
		if err != nil {
			return m, err
		}
		var crds, rest []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" && strings.HasPrefix(o.GetAPIVersion(), "apiextensions.k8s.io/") {
				crds = append(crds, o)
			} else {
				rest = append(rest, o)
			}
		}
		if m.CRDs, err = marshalAll(crds); err != nil {
			return m, err
		}
		if m.RawManifest, err = marshalAll(rest); err != nil {
			return m, err
		}
	case cfg.Chart != "":
		archive, err := chartArchive(fsys, path.Clean(cfg.Chart))
		if err != nil {
			return m, err
		}
		if _, err := render.HelmChart(archive, render.HelmOptions{ReleaseName: cfg.Name}); err != nil {
			return m, fmt.Errorf("the chart does not render with its default values: %w", err)
		}
		m.HelmChart = archive
	}
	if cfg.DefaultCR != "" {
		data, err := fs.ReadFile(fsys, path.Clean(cfg.DefaultCR))
		if err != nil {
			return m, fmt.Errorf("reading the default CR: %w", err)
		}
		objs, err := render.Raw(data)
		if err != nil {
			return m, fmt.Errorf("default CR %s: %w", cfg.DefaultCR, err)
		}
		if len(objs) != 1 {
			return m, fmt.Errorf("default CR %s: want one object, found %d", cfg.DefaultCR, len(objs))
		}
		if m.DefaultCR, err = yaml.Marshal(objs[0].Object); err != nil {
			return m, err
		}
	}
	if len(m.RawManifest) == 0 && len(m.CRDs) == 0 && len(m.HelmChart) == 0 {
		return m, errors.New("the module's content is empty")
	}
	return m, nil
}

// renderKustomize copies fsys into memory (leaving out dot directories such
// as .git) and builds the kustomization at dir there, so that a module
// embedded in a binary builds as one on disk does.
func renderKustomize(fsys fs.FS, dir string) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			return mem.MkdirAll("/" + p)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, data)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the module's files: %w", err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/"+dir)
	if err != nil {
		return nil, fmt.Errorf("building the kustomization %s: %w", dir, err)
	}
	text, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("building the kustomization %s: %w", dir, err)
	}
	objs, err := render.Raw(text)
	if err != nil {
		return nil, fmt.Errorf("the kustomization %s: %w", dir, err)
	}
	return objs, nil
}

func marshalAll(objs []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// chartArchive returns a packaged chart as it is, or packages a chart
// directory: every file under a top-level directory named after the chart,
// in a stable order with no timestamps, so that the same chart has the same
// digest.
func chartArchive(fsys fs.FS, p string) ([]byte, error) {
	if strings.HasSuffix(p, ".tgz") || strings.HasSuffix(p, ".tar.gz") {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("reading the chart: %w", err)
		}
		return data, nil
	}
	meta, err := fs.ReadFile(fsys, path.Join(p, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", p, err)
	}
	var chartMeta struct {
		Name string `json:"name"`
	}
	if err := yaml.Unmarshal(meta, &chartMeta); err != nil || chartMeta.Name == "" {
		return nil, fmt.Errorf("chart %s: Chart.yaml has no name", p)
	}
	return render.PackChart(fsys, p, chartMeta.Name)
}

// chartValues are a packaged chart's default values.
func chartValues(archive []byte) (map[string]any, error) {
	chrt, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return chrt.Values, nil
}

// refName is the layout's annotation naming the artifact, as `oras` and
// `crane` read it.
const refName = "org.opencontainers.image.ref.name"

// WriteLayout writes the module's artifact into an OCI image layout at dir,
// replacing a layout there; a directory that holds anything else is left
// alone and refused. It returns the artifact.
func WriteLayout(dir string, m ociartifact.Module, version string) (v1.Image, error) {
	img, err := ociartifact.NewImage(m.Layers())
	if err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return nil, fmt.Errorf("%s is not empty and not an OCI layout: choose another output directory", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refName: version})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	return img, nil
}

// ReadLayout reads the module artifact that WriteLayout wrote at dir.
func ReadLayout(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI layout (run lmctl module build first): %w", dir, err)
	}
	index, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(manifest.Manifests) != 1 {
		return nil, fmt.Errorf("the OCI layout %s holds %d artifacts, want one", dir, len(manifest.Manifests))
	}
	return p.Image(manifest.Manifests[0].Digest)
}

// Package install renders the operator's installation: the Helm chart
// (charts/lifecycle-manager) and the kustomize layout (config/default), so
// that tests can apply them to a real API server and compare the two, and so
// that `make manifests` can generate the kustomize bases from the chart.
package install

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
)

// ReleaseName is the Helm release name the docs use.
const ReleaseName = "lifecycle-manager"

// Rendered is a chart's output: its CRDs, and its templates' objects by
// template path relative to templates/ (e.g. "manager/deployment.yaml").
type Rendered struct {
	CRDs      []*unstructured.Unstructured
	Templates map[string][]*unstructured.Unstructured
}

// Objects returns the CRDs, then the templates' objects in template order,
// as helm install applies them.
func (r Rendered) Objects() []*unstructured.Unstructured {
	objs := slices.Clone(r.CRDs)
	for _, name := range slices.Sorted(maps.Keys(r.Templates)) {
		objs = append(objs, r.Templates[name]...)
	}
	return objs
}

// RenderChart renders the chart in dir as `helm install` would into
// namespace, with values over the chart's own.
func RenderChart(dir, namespace string, values map[string]any) (Rendered, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return Rendered{}, fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	release := chartutil.ReleaseOptions{Name: ReleaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(chrt, values, release, chartutil.DefaultCapabilities)
	if err != nil {
		return Rendered{}, fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(chrt, renderValues)
	if err != nil {
		return Rendered{}, fmt.Errorf("rendering the chart: %w", err)
	}
	out := Rendered{Templates: map[string][]*unstructured.Unstructured{}}
	for _, crd := range chrt.CRDObjects() {
		objs, err := render.Raw(crd.File.Data)
		if err != nil {
			return Rendered{}, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		out.CRDs = append(out.CRDs, objs...)
	}
	prefix := chrt.Name() + "/templates/"
	for file, text := range files {
		if strings.HasPrefix(path.Base(file), "_") || path.Base(file) == "NOTES.txt" {
			continue
		}
		objs, err := render.Raw([]byte(text))
		if err != nil {
			return Rendered{}, fmt.Errorf("template %s: %w", file, err)
		}
		if len(objs) > 0 {
			out.Templates[strings.TrimPrefix(file, prefix)] = objs
		}
	}
	return out, nil
}

// RenderKustomize builds the kustomization in dir, as kubectl apply -k does.
func RenderKustomize(dir string) ([]*unstructured.Unstructured, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("building the kustomization %s: %w", dir, err)
	}
	text, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("building the kustomization %s: %w", dir, err)
	}
	return render.Raw(text)
}

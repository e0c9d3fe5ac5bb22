package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// DefaultKubeVersion is what .Capabilities.KubeVersion tells a chart unless
// HelmOptions says otherwise: the Kubernetes version this operator is built
// against.
const DefaultKubeVersion = "v1.37.0"

// helmHookAnnotation marks a Helm hook. Hooks belong to a Helm release's
// life cycle (tests, pre/post install jobs), which a module does not have.
const helmHookAnnotation = "helm.sh/hook"

// ErrOutputTooLarge is the cause of a refusal of a chart whose rendered
// templates exceed HelmOptions.MaxOutputBytes.
var ErrOutputTooLarge = errors.New("rendered chart is larger than the limit")

// HelmOptions are what a chart is rendered with, besides its own files.
type HelmOptions struct {
	// ReleaseName is .Release.Name: the module's name.
	ReleaseName string
	// Namespace is .Release.Namespace: the runtime's sync namespace,
	// kyma-system when empty.
	Namespace string
	// Values override the chart's values.yaml (coalesced as helm install
	// --values does): the Manifest's spec.values, a JSON object, or nil.
	Values *runtime.RawExtension
	// KubeVersion is .Capabilities.KubeVersion, DefaultKubeVersion when
	// empty; the chart's kubeVersion constraint is checked against it.
	KubeVersion string
	// MaxOutputBytes bounds the rendered templates together; 0 leaves them
	// unbounded. It is checked once the engine is done: Helm's engine
	// renders into memory and cannot be stopped on the way.
	MaxOutputBytes int64
}

// HelmChart renders a packaged chart (.tgz) into objects, as helm install
// would apply them: the chart's crds/ files first, then its templates in
// file name order. NOTES.txt, partials (files starting with "_") and Helm
// hooks are left out; lookups see an empty cluster.
func HelmChart(archive []byte, opts HelmOptions) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("loading Helm chart: %w", err)
	}
	name := chrt.Name()
	values, err := renderValues(chrt, opts)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", name, err)
	}
	files, err := engine.Render(chrt, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %q: %w", name, err)
	}
	if opts.MaxOutputBytes > 0 {
		var size int64
		for _, f := range files {
			size += int64(len(f))
		}
		if size > opts.MaxOutputBytes {
			return nil, fmt.Errorf("rendering chart %q: %w: its templates render %d bytes, the limit is %d (--helm-max-output-bytes)", name, ErrOutputTooLarge, size, opts.MaxOutputBytes)
		}
	}

	var objs []*unstructured.Unstructured
	for _, crd := range chrt.CRDObjects() {
		parsed, err := Raw(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("chart %q, %s: %w", name, crd.Filename, err)
		}
		objs = append(objs, parsed...)
	}
	for _, file := range slices.Sorted(maps.Keys(files)) {
		base := path.Base(file)
		if base == "NOTES.txt" || strings.HasPrefix(base, "_") {
			continue
		}
		parsed, err := Raw([]byte(files[file]))
		if err != nil {
			return nil, fmt.Errorf("chart %q, template %s: %w", name, file, err)
		}
		for _, obj := range parsed {
			if _, hook := obj.GetAnnotations()[helmHookAnnotation]; !hook {
				objs = append(objs, obj)
			}
		}
	}
	return objs, nil
}

// renderValues builds what templates see (.Values, .Release, .Capabilities),
// the way helm install does, without asking a cluster.
func renderValues(chrt *chart.Chart, opts HelmOptions) (chartutil.Values, error) {
	overrides, err := decodeValues(opts.Values)
	if err != nil {
		return nil, err
	}
	caps, err := capabilities(opts.KubeVersion)
	if err != nil {
		return nil, err
	}
	if constraint := chrt.Metadata.KubeVersion; constraint != "" &&
		!chartutil.IsCompatibleRange(constraint, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart needs Kubernetes %s, not %s", constraint, caps.KubeVersion.String())
	}
	// Drops subcharts whose condition or tags turn them off.
	if err := chartutil.ProcessDependenciesWithMerge(chrt, overrides); err != nil {
		return nil, fmt.Errorf("processing dependencies: %w", err)
	}
	namespace := opts.Namespace
	if namespace == "" {
		namespace = v1beta2.DefaultRuntimeNamespace
	}
	release := chartutil.ReleaseOptions{Name: opts.ReleaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	values, err := chartutil.ToRenderValues(chrt, overrides, release, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return values, nil
}

// decodeValues reads the Manifest's values: a JSON object, or nothing.
func decodeValues(raw *runtime.RawExtension) (map[string]any, error) {
	if raw == nil {
		return nil, nil
	}
	data := raw.Raw
	if data == nil && raw.Object != nil {
		var err error
		if data, err = json.Marshal(raw.Object); err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var values map[string]any
	if err := utiljson.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("values must be a JSON object: %w", err)
	}
	return values, nil
}

func capabilities(kubeVersion string) (*chartutil.Capabilities, error) {
	if kubeVersion == "" {
		kubeVersion = DefaultKubeVersion
	}
	version, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("parsing Kubernetes version %q: %w", kubeVersion, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *version
	return caps, nil
}

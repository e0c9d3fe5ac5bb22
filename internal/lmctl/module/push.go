package module

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// Published is what `lmctl module push` made: the artifact in the registry
// and the objects that publish it.
type Published struct {
	Artifact    ociartifact.Artifact
	Template    *v1beta2.ModuleTemplate
	ReleaseMeta *v1beta2.ModuleReleaseMeta
}

// Repository is where a module version is pushed: <registry>/<name>:<version>.
func Repository(registry string, cfg *Config) string {
	return fmt.Sprintf("%s/%s:%s", strings.TrimSuffix(registry, "/"), cfg.Name, cfg.Version)
}

// Push pushes the built artifact img to registry (host[/path]) and returns
// the ModuleTemplate (named <name>-<version>, in namespace, every link
// pinned by digest) and the ModuleReleaseMeta (cfg's channel → version, or
// mandatory) that publish it.
func Push(ctx context.Context, img v1.Image, cfg *Config, registry, namespace string, opts ...ociartifact.Option) (Published, error) {
	artifact, err := ociartifact.PushImage(ctx, Repository(registry, cfg), img, opts...)
	if err != nil {
		return Published{}, err
	}
	template, err := Template(img, cfg, namespace, artifact.Links)
	if err != nil {
		return Published{}, err
	}
	return Published{Artifact: artifact, Template: template, ReleaseMeta: ReleaseMeta(cfg, namespace)}, nil
}

// Template is the ModuleTemplate of the artifact img pushed to links. The
// default CR (or a chart's default values) comes from the artifact itself,
// so that the template says what was built.
func Template(img v1.Image, cfg *Config, namespace string, links map[string]string) (*v1beta2.ModuleTemplate, error) {
	v := samplemodules.Version{Module: cfg.Name, Version: cfg.Version, RBAC: cfg.RBAC}
	cr, err := ociartifact.LayerData(img, ociartifact.DefaultCRLayerName)
	if err != nil {
		return nil, fmt.Errorf("reading the default CR from the artifact: %w", err)
	}
	if cr != nil {
		obj := map[string]any{}
		if err := yaml.Unmarshal(cr, &obj); err != nil {
			return nil, fmt.Errorf("parsing the default CR: %w", err)
		}
		v.DefaultCR = &unstructured.Unstructured{Object: obj}
	}
	chart, err := ociartifact.LayerData(img, v1beta2.HelmChartResourceName)
	if err != nil {
		return nil, fmt.Errorf("reading the chart from the artifact: %w", err)
	}
	if chart != nil {
		if v.Values, err = chartValues(chart); err != nil {
			return nil, err
		}
		if v.Values == nil {
			v.Values = map[string]any{}
		}
	}
	t := v.Template(namespace, links)
	t.Spec.Info = cfg.Info.DeepCopy()
	t.Spec.Mandatory = cfg.Mandatory
	t.Spec.RequiresDowntime = cfg.RequiresDowntime
	t.Spec.Target = cfg.Target
	t.Spec.RuntimeValues = cfg.RuntimeValues
	if cfg.Manager != nil {
		gv := orDefault(cfg.Manager.APIVersion, "apps/v1")
		group, version, found := strings.Cut(gv, "/")
		if !found {
			group, version = "", gv
		}
		t.Spec.Manager = &v1beta2.Manager{
			GroupVersionKind: metav1.GroupVersionKind{Group: group, Version: version, Kind: orDefault(cfg.Manager.Kind, "Deployment")},
			Name:             cfg.Manager.Name,
			Namespace:        cfg.Manager.Namespace,
		}
	}
	labels := map[string]string{}
	if cfg.Beta {
		labels[v1beta2.BetaLabel] = "true"
	}
	if cfg.Internal {
		labels[v1beta2.InternalLabel] = "true"
	}
	if len(labels) > 0 {
		t.Labels = labels
	}
	return t, nil
}

// ReleaseMeta puts cfg's version on its channel (or makes it mandatory).
// It names this one channel only: a module with more channels merges it
// into its ModuleReleaseMeta by hand.
func ReleaseMeta(cfg *Config, namespace string) *v1beta2.ModuleReleaseMeta {
	if cfg.Mandatory {
		m := samplemodules.ReleaseMeta(namespace, cfg.Name, nil)
		m.Spec.Mandatory = &v1beta2.Mandatory{Version: cfg.Version}
		return m
	}
	return samplemodules.ReleaseMeta(namespace, cfg.Name, map[string]string{cfg.Channel: cfg.Version})
}

// YAML writes the objects as one multi-document YAML stream, ready for
// kubectl apply -f: without the empty creationTimestamp that would mark
// them as read from a cluster, and without null fields in spec.
func YAML(objs ...any) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		delete(m, "status")
		if spec, ok := m["spec"].(map[string]any); ok {
			for k, v := range spec {
				if v == nil { // e.g. an empty spec.descriptor, which the API server refuses as null
					delete(spec, k)
				}
			}
		}
		if data, err = yaml.Marshal(m); err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

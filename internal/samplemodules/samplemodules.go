// Package samplemodules bundles the modules that tests, the benchmark and the
// dev environment install, and publishes them: pushes their content to an
// OCI registry and creates their ModuleTemplates and ModuleReleaseMetas.
//
//   - sample 1.0.0: a template-operator-like module with its own CRD, RBAC
//     (declared in its template too, so it is written as its own identity), a
//     manager Deployment and a default custom resource whose status.state a
//     module operator sets (see RunSampleOperator).
//   - chart 1.0.0: a module packaged as a Helm chart with values.
//   - evolving 1.0.0 and 2.0.0: 2.0.0 drops one ConfigMap and adds another.
package samplemodules

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

//go:embed modules
var files embed.FS

// Version is one published version of a module.
type Version struct {
	Module  string
	Version string
	// Content is what is pushed to the registry.
	Content ociartifact.Module
	// DefaultCR is the module's default custom resource (ModuleTemplate
	// spec.data), nil if it has none.
	DefaultCR *unstructured.Unstructured
	// Values are a chart module's values (spec.data's spec), nil otherwise.
	Values map[string]any
	// Manager names the workload whose readiness tells the module's health.
	Manager *ManagerRef
	// RBAC is what the module's operator needs (ModuleTemplate spec.rbac):
	// the module is then written as an identity of its own.
	RBAC *v1beta2.ModuleRBAC
}

// ManagerRef names a module's manager Deployment.
type ManagerRef struct {
	Name string
}

// Names of the bundled modules.
const (
	Sample   = "sample"
	Chart    = "chart"
	Evolving = "evolving"
)

// All returns every bundled module version.
func All() ([]Version, error) {
	var versions []Version
	modules, err := fs.ReadDir(files, "modules")
	if err != nil {
		return nil, err
	}
	for _, m := range modules {
		vdirs, err := fs.ReadDir(files, path.Join("modules", m.Name()))
		if err != nil {
			return nil, err
		}
		for _, v := range vdirs {
			version, err := load(m.Name(), v.Name())
			if err != nil {
				return nil, fmt.Errorf("loading module %s %s: %w", m.Name(), v.Name(), err)
			}
			versions = append(versions, version)
		}
	}
	return versions, nil
}

// Get returns one bundled module version.
func Get(module, version string) (Version, error) {
	return load(module, version)
}

func load(module, version string) (Version, error) {
	dir := path.Join("modules", module, version)
	v := Version{Module: module, Version: version}
	read := func(name string) ([]byte, error) {
		data, err := files.ReadFile(path.Join(dir, name))
		if err != nil {
			if errorsIsNotExist(err) {
				return nil, nil
			}
			return nil, err
		}
		return data, nil
	}
	var err error
	if v.Content.RawManifest, err = read("manifest.yaml"); err != nil {
		return v, err
	}
	if v.Content.CRDs, err = read("crds.yaml"); err != nil {
		return v, err
	}
	cr, err := read("defaultcr.yaml")
	if err != nil {
		return v, err
	}
	if cr != nil {
		v.Content.DefaultCR = cr
		obj := map[string]any{}
		if err := yaml.Unmarshal(cr, &obj); err != nil {
			return v, fmt.Errorf("parsing defaultcr.yaml: %w", err)
		}
		v.DefaultCR = &unstructured.Unstructured{Object: obj}
	}
	if _, err := fs.Stat(files, path.Join(dir, "chart")); err == nil {
		if v.Content.HelmChart, err = packageChart(path.Join(dir, "chart")); err != nil {
			return v, err
		}
		raw, err := fs.ReadFile(files, path.Join(dir, "chart", "values.yaml"))
		if err != nil {
			return v, err
		}
		v.Values = map[string]any{}
		if err := yaml.Unmarshal(raw, &v.Values); err != nil {
			return v, fmt.Errorf("parsing chart values: %w", err)
		}
	}
	if module == Sample {
		v.Manager = &ManagerRef{Name: "sample-manager"}
		v.RBAC = sampleRBAC()
	}
	return v, nil
}

// sampleRBAC is what the sample module's operator needs, as its ClusterRole
// in manifest.yaml grants it: its own custom resources, cluster-wide. The
// sample module is therefore installed as its own identity, as a module
// team that declares RBAC would have it (docs/modules.md).
func sampleRBAC() *v1beta2.ModuleRBAC {
	return &v1beta2.ModuleRBAC{ClusterRules: []rbacv1.PolicyRule{{
		APIGroups: []string{"operator.kyma-project.io"},
		Resources: []string{"samples", "samples/status"},
		Verbs:     []string{"get", "list", "watch", "update", "patch"},
	}}}
}

// packageChart writes the chart directory as a .tgz the way `helm package`
// lays it out: every file under a top-level directory named after the chart.
func packageChart(dir string) ([]byte, error) {
	return render.PackChart(files, dir, "chart-module")
}

// Publish pushes every bundled module version to the registry at host and
// returns their ModuleTemplates (named <module>-<version>, in namespace),
// with digest-pinned links, ready to create.
func Publish(ctx context.Context, host, namespace string, opts ...ociartifact.Option) ([]*v1beta2.ModuleTemplate, error) {
	versions, err := All()
	if err != nil {
		return nil, err
	}
	templates := make([]*v1beta2.ModuleTemplate, 0, len(versions))
	for _, v := range versions {
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", host, v.Module, v.Version), v.Content.Layers(), opts...)
		if err != nil {
			return nil, err
		}
		templates = append(templates, v.Template(namespace, artifact.Links))
	}
	return templates, nil
}

// Template is the ModuleTemplate of the version whose layers were pushed to
// links (layer name → oci:// link).
func (v Version) Template(namespace string, links map[string]string) *v1beta2.ModuleTemplate {
	t := &v1beta2.ModuleTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta2.GroupVersion.String(), Kind: "ModuleTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: v.Module + "-" + v.Version, Namespace: namespace},
		Spec: v1beta2.ModuleTemplateSpec{
			ModuleName: v.Module,
			Version:    v.Version,
			Info: &v1beta2.ModuleInfo{
				Repository:    "https://example.invalid/modules/" + v.Module,
				Documentation: "https://example.invalid/modules/" + v.Module + "/docs",
			},
		},
	}
	for _, name := range []string{v1beta2.RawManifestResourceName, v1beta2.CRDsResourceName, v1beta2.HelmChartResourceName} {
		if link, ok := links[name]; ok {
			t.Spec.Resources = append(t.Spec.Resources, v1beta2.ContentResource{Name: name, Link: link})
		}
	}
	switch {
	case v.DefaultCR != nil:
		t.Spec.Data = v.DefaultCR.DeepCopy()
	case v.Values != nil:
		t.Spec.Data = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Values",
			"metadata": map[string]any{"name": v.Module}, "spec": runtimeDeepCopy(v.Values),
		}}
	}
	t.Spec.RBAC = v.RBAC.DeepCopy()
	if v.Manager != nil {
		t.Spec.Manager = &v1beta2.Manager{
			GroupVersionKind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Name:             v.Manager.Name,
		}
	}
	return t
}

// ReleaseMeta assigns versions to channels for a module.
func ReleaseMeta(namespace, module string, channels map[string]string) *v1beta2.ModuleReleaseMeta {
	m := &v1beta2.ModuleReleaseMeta{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta2.GroupVersion.String(), Kind: "ModuleReleaseMeta"},
		ObjectMeta: metav1.ObjectMeta{Name: module, Namespace: namespace},
		Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: module},
	}
	names := make([]string, 0, len(channels))
	for c := range channels {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		m.Spec.Channels = append(m.Spec.Channels, v1beta2.ChannelVersionAssignment{Channel: c, Version: channels[c]})
	}
	return m
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return runtime.DeepCopyJSON(m)
}

func errorsIsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist)
}

package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// The modules of this package. Gated modules are shaped like the public
// template-operator: their own CRD, a few objects and a default custom
// resource whose status.state, set by the module's operator, is the module's
// readiness. Here the module's operator is runModuleOperator, and a test
// decides when it does its work (gates), which is how a test holds an install
// or a removal in the middle, deterministically, before a fault.
const (
	gatedModules = 6
	// gatedGroup is the API group of every gated module's CRD.
	gatedGroup = "faults.example.com"
	// moduleFinalizer is what the gated modules' operator puts on its
	// custom resources, as real module operators do, so that a removal waits
	// for it.
	moduleFinalizer = "faults.example.com/cleanup"
	// plain is a module of two ConfigMaps: 1.0.0 on channel regular, 2.0.0
	// (changed data, same objects) on fast.
	plain = "plain"
)

// gatedWords name the gated modules: module names are lowercase words.
var gatedWords = [gatedModules]string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}

// gated is the name of the i-th gated module.
func gated(i int) string { return "gated-" + gatedWords[i] }

// gatedRange names the gated modules from, inclusive, to to, exclusive.
func gatedRange(from, to int) []string {
	var names []string
	for i := from; i < to; i++ {
		names = append(names, gated(i))
	}
	return names
}

// gatedPlural is the resource of the i-th gated module's custom resource.
func gatedPlural(i int) string { return "gated" + gatedWords[i] + "s" }

func gatedVersion(i int) samplemodules.Version {
	kind := "Gated" + strings.ToUpper(gatedWords[i][:1]) + gatedWords[i][1:]
	crd := gatedCRD(gatedPlural(i), kind, "gated"+gatedWords[i])
	name := gated(i)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s-config
data:
  version: 1.0.0
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s-extra
data:
  note: a second object of the module
`, name)
	return samplemodules.Version{
		Module:  name,
		Version: "1.0.0",
		Content: ociartifact.Module{RawManifest: []byte(manifest), CRDs: []byte(crd)},
		DefaultCR: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gatedGroup + "/v1", "kind": kind,
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"replicas": int64(1)},
		}},
	}
}

// gatedCRD is the CRD of a gated kind: namespaced, with a status
// subresource, any fields.
func gatedCRD(plural, kind, singular string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[2]s
spec:
  group: %[2]s
  names: {kind: %[3]s, listKind: %[3]sList, plural: %[1]s, singular: %[4]s}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, plural, gatedGroup, kind, singular)
}

func plainVersion(version string) samplemodules.Version {
	manifest := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: plain-config
data:
  version: %q
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: plain-extra
data:
  note: the same in every version
`, version)
	return samplemodules.Version{Module: plain, Version: version, Content: ociartifact.Module{RawManifest: []byte(manifest)}}
}

// publishModules pushes every module version to the registry and creates
// its ModuleTemplate and ModuleReleaseMeta in the control plane.
func publishModules(ctx context.Context, c client.Client, registryHost string) error {
	versions := []samplemodules.Version{plainVersion("1.0.0"), plainVersion("2.0.0")}
	for i := range gatedModules {
		versions = append(versions, gatedVersion(i))
	}
	for _, v := range versions {
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:%s", registryHost, v.Module, v.Version), v.Content.Layers(), ociartifact.Insecure())
		if err != nil {
			return fmt.Errorf("pushing %s %s: %w", v.Module, v.Version, err)
		}
		if err := c.Create(ctx, v.Template(kcpNamespace, artifact.Links)); err != nil {
			return fmt.Errorf("creating the template of %s %s: %w", v.Module, v.Version, err)
		}
	}
	metas := []*v1beta2.ModuleReleaseMeta{samplemodules.ReleaseMeta(kcpNamespace, plain, map[string]string{"regular": "1.0.0", "fast": "2.0.0"})}
	for i := range gatedModules {
		metas = append(metas, samplemodules.ReleaseMeta(kcpNamespace, gated(i), map[string]string{"regular": "1.0.0"}))
	}
	for _, m := range metas {
		if err := c.Create(ctx, m); err != nil {
			return fmt.Errorf("creating the release meta of %s: %w", m.Name, err)
		}
	}
	return nil
}

// gates says, per gated module, whether its operator works: an open module's
// custom resources are set Ready and released from the finalizer when
// deleted; a closed module's new resources stay without a state (the module
// is Processing) and deleted ones stay (the module is Deleting). A gate
// covers the module in every runtime.
type gates struct {
	mu   sync.Mutex
	open map[string]bool
}

// set opens or closes the modules' gates.
func (g *gates) set(open bool, modules ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = map[string]bool{}
	}
	for _, m := range modules {
		g.open[m] = open
	}
}

func (g *gates) isOpen(module string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open[module]
}

// moduleOperatorInterval is how often the module operator looks at a
// runtime. It polls rather than watches because it must survive its runtime
// being stopped and replaced by an empty one.
const moduleOperatorInterval = 250 * time.Millisecond

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// runModuleOperator plays the operator of every gated module in the runtime
// at cfg until ctx ends. Errors (the runtime down, a CRD not there yet,
// conflicts) are left for the next round.
func runModuleOperator(ctx context.Context, cfg *rest.Config, g *gates) error {
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ticker := time.NewTicker(moduleOperatorInterval)
	defer ticker.Stop()
	for {
		crds, err := c.Resource(crdResource).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, crd := range crds.Items {
				plural, group, _ := strings.Cut(crd.GetName(), ".")
				if group == gatedGroup {
					operateGated(ctx, c.Resource(schema.GroupVersionResource{Group: gatedGroup, Version: "v1", Resource: plural}), g)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// operateGated does one round of a gated module's operator on its resources.
func operateGated(ctx context.Context, r dynamic.NamespaceableResourceInterface, g *gates) {
	list, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range list.Items {
		cr := &list.Items[i]
		open := g.isOpen(cr.GetName())
		finalizers := cr.GetFinalizers()
		has := false
		for _, f := range finalizers {
			has = has || f == moduleFinalizer
		}
		rc := r.Namespace(cr.GetNamespace())
		switch {
		case cr.GetDeletionTimestamp() != nil:
			if open && has {
				cr.SetFinalizers(without(finalizers, moduleFinalizer))
				_, _ = rc.Update(ctx, cr, metav1.UpdateOptions{})
			}
		case !has:
			cr.SetFinalizers(append(finalizers, moduleFinalizer))
			_, _ = rc.Update(ctx, cr, metav1.UpdateOptions{})
		case open:
			if state, _, _ := unstructured.NestedString(cr.Object, "status", "state"); state != string(v1beta2.StateReady) {
				_ = unstructured.SetNestedField(cr.Object, string(v1beta2.StateReady), "status", "state")
				_, _ = rc.UpdateStatus(ctx, cr, metav1.UpdateOptions{})
			}
		}
	}
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

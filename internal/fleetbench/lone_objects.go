package fleetbench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// loneObject names one object a lone-runtime module puts in the runtime.
type loneObject struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func (o loneObject) String() string {
	if o.namespace == "" {
		return o.gvr.Resource + "/" + o.name
	}
	return o.gvr.Resource + "/" + o.namespace + "/" + o.name
}

// runtimeObjects are the objects the module ships, its CRD and default CR
// included: what the runtime holds once the module is installed. Their
// number is objects().
func (m loneModule) runtimeObjects(syncNamespace string) []loneObject {
	core := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: resource}
	}
	objects := []loneObject{
		{gvr: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, name: lonePlural + "." + m.group()},
		{gvr: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, name: m.name + "-validating"},
		{gvr: core("serviceaccounts"), namespace: syncNamespace, name: m.manager()},
		{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, name: m.manager()},
		{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, name: m.manager()},
		{gvr: schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}, name: m.name + "-priority"},
		{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, namespace: syncNamespace, name: m.manager()},
		{gvr: core("services"), namespace: syncNamespace, name: m.name + "-webhook"},
	}
	for c := range m.configMaps {
		objects = append(objects, loneObject{gvr: core("configmaps"), namespace: syncNamespace, name: fmt.Sprintf("%s-config-%d", m.name, c)})
	}
	return append(objects, loneObject{gvr: m.gvr(), namespace: syncNamespace, name: loneCR})
}

// presentObjects reads every object of the modules from the runtime and
// returns those that exist and are not being deleted. An object whose kind
// the runtime no longer serves (its CRD gone) does not exist; a CRD the API
// server still finalizes (it removes the CRD's custom resources first) is
// being deleted.
func presentObjects(ctx context.Context, d dynamic.Interface, syncNamespace string, modules []loneModule) ([]loneObject, error) {
	var present []loneObject
	for _, m := range modules {
		for _, o := range m.runtimeObjects(syncNamespace) {
			live, err := d.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
			switch {
			case err == nil:
				if live.GetDeletionTimestamp() == nil {
					present = append(present, o)
				}
			case apierrors.IsNotFound(err):
			default:
				return nil, fmt.Errorf("reading %s: %w", o, err)
			}
		}
	}
	return present, nil
}

// loneSteps are the moments the stand-in first saw each module's CRD, saw
// it Established, and saw its manager: with the default CR's, they show
// where a module's install spends its time.
type loneSteps struct {
	crd, established, manager map[string]time.Time
}

// watchCRDs records when each module's CRD is created and Established.
func (s *loneStandIn) watchCRDs(ctx context.Context) {
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	byName := map[string]string{}
	for _, m := range s.modules {
		byName[lonePlural+"."+m.group()] = m.name
	}
	s.watch(ctx, func(ctx context.Context) (watch.Interface, error) {
		return s.l.dynamic.Resource(crds).Watch(ctx, metav1.ListOptions{})
	}, func(u *unstructured.Unstructured) {
		module, ok := byName[u.GetName()]
		if !ok {
			return
		}
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, seen := s.steps.crd[module]; !seen {
			s.steps.crd[module] = now
		}
		if _, seen := s.steps.established[module]; !seen && crdEstablished(u) {
			s.steps.established[module] = now
		}
	})
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
			return true
		}
	}
	return false
}

// stepsTimeline says, per module in the order their default CRs were
// applied, when after the operator's start its CRD was created, was
// Established, its manager created and its default CR created.
func (s *loneStandIn) stepsTimeline(started time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.modules))
	for _, m := range s.modules {
		names = append(names, m.name)
	}
	sort.SliceStable(names, func(i, j int) bool { return s.crs[names[i]].Before(s.crs[names[j]]) })
	at := func(times map[string]time.Time, name string) string {
		t, ok := times[name]
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%.2f", t.Sub(started).Seconds())
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %s/%s/%s/%s", n, at(s.steps.crd, n), at(s.steps.established, n), at(s.steps.manager, n), at(s.crs, n))
	}
	return "(s after the operator's start: CRD created/Established/manager created/default CR created) " + strings.Join(parts, ", ")
}

// crAfterManager is, per module, the seconds from its manager's creation
// to its default CR's.
func (s *loneStandIn) crAfterManager() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gaps []float64
	for _, m := range s.modules {
		manager, ok := s.steps.manager[m.name]
		cr, seen := s.crs[m.name]
		if ok && seen {
			gaps = append(gaps, cr.Sub(manager).Seconds())
		}
	}
	return gaps
}

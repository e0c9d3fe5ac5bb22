package transform

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// debugValue is the value of the debug label when debug mode is on.
const debugValue = "true"

// podTemplateKinds are the workloads whose pods get the debug label too: a
// module operator reads its own pod's labels (downward API) to choose its log
// level, and changing them restarts it with the new level.
var podTemplateKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// setDebug puts the debug label on obj (and its pod template) when debug
// mode is on, and takes it off when it is off.
func setDebug(obj *unstructured.Unstructured, debug bool) {
	labels := obj.GetLabels()
	if debug {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1beta2.DebugLabel] = debugValue
	} else {
		delete(labels, v1beta2.DebugLabel)
	}
	obj.SetLabels(labels)

	gvk := obj.GroupVersionKind()
	if gvk.Group != "apps" || !podTemplateKinds[gvk.Kind] {
		return
	}
	template := childMap(childMap(obj.Object, "spec", false), "template", false)
	if template == nil {
		return
	}
	podLabels := childMap(childMap(template, "metadata", debug), "labels", debug)
	if podLabels == nil {
		return
	}
	if debug {
		podLabels[v1beta2.DebugLabel] = debugValue
	} else {
		delete(podLabels, v1beta2.DebugLabel)
	}
}

// childMap returns the map under key in parent, creating it when create is
// set and the key is absent or null. A value that is not a map is left for
// the API server to refuse, and nil returned.
func childMap(parent map[string]any, key string, create bool) map[string]any {
	if parent == nil {
		return nil
	}
	switch v := parent[key].(type) {
	case map[string]any:
		if v != nil {
			return v
		}
	case nil:
	default:
		return nil
	}
	if !create {
		return nil
	}
	m := map[string]any{}
	parent[key] = m
	return m
}

// Package render turns a module's fetched content into the Kubernetes
// objects to apply: raw manifests (multi-document YAML or JSON) and Helm
// charts rendered with the Manifest's values.
//
// Rendering is pure: no cluster is asked anything, so the same content and
// values give the same objects for every runtime, and a chart that reads the
// cluster (Helm's lookup) sees nothing.
package render

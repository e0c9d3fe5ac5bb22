package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Raw parses a manifest of YAML documents separated by "---", or of JSON
// objects, into objects in document order. Empty documents are skipped and
// List kinds are expanded into their items, as kubectl apply does, so that a
// module's manifest installs as it would by hand. A document that is not an
// object with apiVersion and kind is an error naming it (documents are
// counted from 1).
func Raw(data []byte) ([]*unstructured.Unstructured, error) {
	decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := decoder.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		parsed, err := parseDocument(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		objs = append(objs, parsed...)
	}
}

// parseDocument returns the objects of one document: none for an empty one,
// the items of a List, or the object itself.
func parseDocument(raw []byte) ([]*unstructured.Unstructured, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var content map[string]any
	// utiljson keeps integers as int64, as the rest of apimachinery expects.
	if err := utiljson.Unmarshal(raw, &content); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	if len(content) == 0 {
		return nil, nil
	}
	obj := &unstructured.Unstructured{Object: content}
	if err := checkTypeMeta(obj); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(obj.GetKind(), "List") || !obj.IsList() {
		return []*unstructured.Unstructured{obj}, nil
	}
	list, err := obj.ToList()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", obj.GetKind(), err)
	}
	items := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		item := &list.Items[i]
		if err := checkTypeMeta(item); err != nil {
			return nil, fmt.Errorf("%s item %d: %w", obj.GetKind(), i+1, err)
		}
		items = append(items, item)
	}
	return items, nil
}

// checkTypeMeta refuses an object the API server could not place.
func checkTypeMeta(obj *unstructured.Unstructured) error {
	var missing []string
	if obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if len(missing) == 0 {
		return nil
	}
	if name := obj.GetName(); name != "" {
		return fmt.Errorf("object %q has no %s", name, strings.Join(missing, " and no "))
	}
	return fmt.Errorf("object has no %s", strings.Join(missing, " and no "))
}

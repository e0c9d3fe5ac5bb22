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
	return expand(&unstructured.Unstructured{Object: content})
}

// expand returns obj itself, or, for a List, its items, Lists among them
// expanded in turn: an object applied must be a resource, never a List.
func expand(obj *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if err := checkObject(obj); err != nil {
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
		expanded, err := expand(&list.Items[i])
		if err != nil {
			return nil, fmt.Errorf("%s item %d: %w", obj.GetKind(), i+1, err)
		}
		items = append(items, expanded...)
	}
	return items, nil
}

// checkObject refuses an object the API server could not place, or whose
// metadata the operator could not put its ownership labels on: apiVersion
// and kind are required, and metadata, when set, must be an object with
// string name and namespace and string maps as labels and annotations.
// Metadata null is the same as none.
func checkObject(obj *unstructured.Unstructured) error {
	var missing []string
	if obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if len(missing) > 0 {
		if name := obj.GetName(); name != "" {
			return fmt.Errorf("object %q has no %s", name, strings.Join(missing, " and no "))
		}
		return fmt.Errorf("object has no %s", strings.Join(missing, " and no "))
	}
	if err := checkMetadata(obj.Object); err != nil {
		return fmt.Errorf("%s %q: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

func checkMetadata(content map[string]any) error {
	value, found := content["metadata"]
	if !found {
		return nil
	}
	if value == nil {
		delete(content, "metadata")
		return nil
	}
	metadata, ok := value.(map[string]any)
	if !ok {
		return fmt.Errorf("metadata must be an object, not %s", jsonType(value))
	}
	for _, field := range []string{"name", "generateName", "namespace"} {
		if v, ok := metadata[field]; ok && v != nil {
			if _, ok := v.(string); !ok {
				return fmt.Errorf("metadata.%s must be a string, not %s", field, jsonType(v))
			}
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		v, ok := metadata[field]
		if !ok || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("metadata.%s must map strings to strings, not be %s", field, jsonType(v))
		}
		for key, value := range m {
			if _, ok := value.(string); !ok {
				return fmt.Errorf("metadata.%s[%q] must be a string, not %s (quote it)", field, key, jsonType(value))
			}
		}
	}
	return nil
}

// jsonType names the JSON type of a decoded value, for messages.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return "a number"
	}
}

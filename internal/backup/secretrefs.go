package backup

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxReferenceDepth bounds how deep SecretReferences looks into an
// object: real specs are a handful of levels deep, and a hostile one must
// not cost a deep recursion.
const maxReferenceDepth = 32

// SecretReferences are the names of the Secrets in the object's own
// namespace that its content refers to, sorted and each once. The content
// is every top-level field but apiVersion, kind, metadata and status, at
// any depth, in maps and lists. A reference is, by the conventions of
// Kubernetes' own APIs:
//
//   - a string field named secretName or ending in SecretName
//     (volumes[].secret.secretName, tls[].secretName, tlsSecretName);
//   - a map field named secretRef or secretKeyRef, or ending in SecretRef
//     or SecretKeyRef (envFrom[].secretRef, valueFrom.secretKeyRef,
//     credentialsSecretRef), with a string field name.
//
// A reference that names another namespace is not followed: a map with a
// namespace field (secretNamespace, next to a secretName) other than the
// object's own; an empty one means the object's own, as in Kubernetes. Neither are those of a cluster-scoped object (namespace
// ""), which has no namespace of its own, nor names that are not valid
// Secret names. Taking Secrets from other namespaces would let a runtime
// owner's custom resource pull any Secret of the runtime into a backup.
func SecretReferences(content map[string]any, namespace string) []string {
	if namespace == "" {
		return nil
	}
	var names []string
	for field, v := range content {
		switch field {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		names = referencesIn(v, namespace, 1, names)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// referencesIn adds the references in v to names.
func referencesIn(v any, namespace string, depth int, names []string) []string {
	if depth > maxReferenceDepth {
		return names
	}
	switch v := v.(type) {
	case []any:
		for _, item := range v {
			names = referencesIn(item, namespace, depth+1, names)
		}
	case map[string]any:
		for field, value := range v {
			if isSecretNameField(field) && inNamespace(v, "secretNamespace", namespace) && inNamespace(v, "namespace", namespace) {
				names = appendName(names, value)
			}
			if ref, ok := value.(map[string]any); ok && isSecretRefField(field) && inNamespace(ref, "namespace", namespace) {
				names = appendName(names, ref["name"])
			}
			names = referencesIn(value, namespace, depth+1, names)
		}
	}
	return names
}

func isSecretNameField(field string) bool {
	return field == "secretName" || strings.HasSuffix(field, "SecretName")
}

func isSecretRefField(field string) bool {
	return field == "secretRef" || field == "secretKeyRef" ||
		strings.HasSuffix(field, "SecretRef") || strings.HasSuffix(field, "SecretKeyRef")
}

// inNamespace says whether m's field, if present, names the namespace;
// present and anything else (another namespace, not a string) is no.
func inNamespace(m map[string]any, field, namespace string) bool {
	v, ok := m[field]
	if !ok {
		return true
	}
	s, ok := v.(string)
	return ok && (s == "" || s == namespace)
}

// appendName adds v if it is a valid Secret name.
func appendName(names []string, v any) []string {
	name, ok := v.(string)
	if !ok || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return names
	}
	return append(names, name)
}

package catalog

import (
	"github.com/runtime-fleet/lifecycle-manager/internal/redact"
)

// stripCredentials removes what may be a credential from the spec of a
// runtime's catalog copy. The control plane's ModuleTemplates may carry
// links with a password in their user info or a token in their query, which
// the operator needs to fetch content; runtimes only discover modules from
// their copy and fetch nothing, so they get the links without them.
//
//   - spec.resources[].link keeps scheme, host, path and its #sha256= pin;
//     an entry whose link does not parse is left out.
//   - Every other string that holds a URL (descriptor, info, ...) gets the
//     same treatment wherever it appears.
//   - spec.data, the module's default custom resource, is left as it is: the
//     module installs it into the runtime anyway.
func stripCredentials(spec map[string]any) {
	for key, value := range spec {
		switch key {
		case "data":
		case "resources":
			spec[key] = stripResourceLinks(value)
		default:
			spec[key] = stripURLs(value)
		}
	}
}

func stripResourceLinks(value any) any {
	resources, ok := value.([]any)
	if !ok {
		return stripURLs(value)
	}
	out := make([]any, 0, len(resources))
	for _, r := range resources {
		entry, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if link, isString := entry["link"].(string); isString {
			clean, parsed := redact.Link(link)
			if !parsed {
				continue
			}
			entry["link"] = clean
		}
		out = append(out, stripURLs(entry))
	}
	return out
}

// stripURLs walks a decoded JSON value and redacts the URLs in each string.
func stripURLs(value any) any {
	switch v := value.(type) {
	case string:
		return redact.Text(v)
	case map[string]any:
		for k, item := range v {
			v[k] = stripURLs(item)
		}
		return v
	case []any:
		for i, item := range v {
			v[i] = stripURLs(item)
		}
		return v
	default:
		return value
	}
}

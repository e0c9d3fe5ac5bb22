package transform

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Localized images (the Kyma API's Manifest spec.localizedImages): image
// references valid where the module is installed, such as a copy of the
// module's images in the landscape's own registry. A container of the
// module's content whose image has the same name (the repository's last
// segment: "template-operator" of europe-docker.pkg.dev/kyma/prod/
// template-operator:1.0.1) runs the localized reference instead.

// podSpecPaths are where each workload kind keeps its pod spec.
var podSpecPaths = map[string][]string{
	"apps/Deployment":  {"spec", "template", "spec"},
	"apps/StatefulSet": {"spec", "template", "spec"},
	"apps/DaemonSet":   {"spec", "template", "spec"},
	"apps/ReplicaSet":  {"spec", "template", "spec"},
	"batch/Job":        {"spec", "template", "spec"},
	"batch/CronJob":    {"spec", "jobTemplate", "spec", "template", "spec"},
	"/Pod":             {"spec"},
}

// Localizer replaces the images of containers by localized references.
type Localizer map[string]string // image name → localized reference

// NewLocalizer parses the localized references; one that is not an image
// reference, or two for the same image name, is refused with the entry
// named.
func NewLocalizer(localized []string) (Localizer, error) {
	l := make(Localizer, len(localized))
	for _, ref := range localized {
		n, err := imageName(ref)
		if err != nil {
			return nil, fmt.Errorf("localized image %q is not an image reference: %w", ref, err)
		}
		if other, ok := l[n]; ok && other != ref {
			return nil, fmt.Errorf("localized images %q and %q are both for image %q: keep one", other, ref, n)
		}
		l[n] = ref
	}
	return l, nil
}

// imageName is the last segment of an image reference's repository.
func imageName(ref string) (string, error) {
	parsed, err := name.ParseReference(ref, name.WeakValidation)
	if err != nil {
		return "", err
	}
	repo := parsed.Context().RepositoryStr()
	return repo[strings.LastIndex(repo, "/")+1:], nil
}

// localize replaces the images of obj's containers that have a localized
// reference. An image that does not parse is left for the runtime to
// refuse.
func (l Localizer) localize(obj *unstructured.Unstructured) {
	if len(l) == 0 {
		return
	}
	gvk := obj.GroupVersionKind()
	path, ok := podSpecPaths[gvk.Group+"/"+gvk.Kind]
	if !ok {
		return
	}
	spec := obj.Object
	for _, key := range path {
		if spec = childMap(spec, key, false); spec == nil {
			return
		}
	}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		containers, _ := spec[list].([]any)
		for _, c := range containers {
			container, ok := c.(map[string]any)
			if !ok {
				continue
			}
			image, _ := container["image"].(string)
			n, err := imageName(image)
			if err != nil {
				continue
			}
			if localized, ok := l[n]; ok {
				container["image"] = localized
			}
		}
	}
}

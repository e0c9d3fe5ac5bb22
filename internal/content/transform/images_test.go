package transform_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
)

func withContainers(obj *unstructured.Unstructured, path []string, lists map[string][]string) *unstructured.Unstructured {
	spec := map[string]any{}
	for list, images := range lists {
		var containers []any
		for i, image := range images {
			containers = append(containers, map[string]any{"name": list + string(rune('a'+i)), "image": image})
		}
		spec[list] = containers
	}
	Expect(unstructured.SetNestedField(obj.Object, spec, path...)).To(Succeed())
	return obj
}

func images(obj *unstructured.Unstructured, path []string, list string) []string {
	containers, _, _ := unstructured.NestedSlice(obj.Object, append(path, list)...)
	var out []string
	for _, c := range containers {
		out = append(out, c.(map[string]any)["image"].(string))
	}
	return out
}

// A container image of the same name as a localized image runs the
// localized reference, in every workload kind and container list; other
// images, and objects without pods, are left as they are.
func TestLocalizedImagesReplaceImagesOfTheSameName(t *testing.T) {
	RegisterTestingT(t)
	podPath := []string{"spec", "template", "spec"}
	deployment := withContainers(object("apps/v1", "Deployment", "", "manager"), podPath, map[string][]string{
		"containers":     {"europe-docker.pkg.dev/kyma-project/prod/template-operator:1.0.1", "docker.io/library/busybox:1.36"},
		"initContainers": {"ghcr.io/acme/setup@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	})
	cronPath := []string{"spec", "jobTemplate", "spec", "template", "spec"}
	cron := withContainers(object("batch/v1", "CronJob", "", "cleanup"), cronPath, map[string][]string{
		"containers": {"template-operator:0.9"},
	})
	config := object("v1", "ConfigMap", "", "settings")
	Expect(unstructured.SetNestedField(config.Object, "template-operator:1.0.1", "data", "image")).To(Succeed())

	opts := options()
	opts.LocalizedImages = []string{
		"registry.landscape.example/kyma/template-operator:1.0.1",
		"registry.landscape.example/mirror/setup:2.0",
	}
	Expect(transform.Objects([]*unstructured.Unstructured{deployment, cron, config}, opts)).To(Succeed())

	Expect(images(deployment, podPath, "containers")).To(Equal([]string{
		"registry.landscape.example/kyma/template-operator:1.0.1", "docker.io/library/busybox:1.36"}))
	Expect(images(deployment, podPath, "initContainers")).To(Equal([]string{"registry.landscape.example/mirror/setup:2.0"}))
	Expect(images(cron, cronPath, "containers")).To(Equal([]string{"registry.landscape.example/kyma/template-operator:1.0.1"}))
	Expect(config.Object["data"]).To(HaveKeyWithValue("image", "template-operator:1.0.1"), "only container images are localized")
}

// Localized images that are not image references, or two for one image,
// are refused with the entry named, and nothing is changed.
func TestLocalizedImagesRefusesWhatItCannotUse(t *testing.T) {
	RegisterTestingT(t)
	for _, tt := range []struct {
		localized []string
		want      string
	}{
		{[]string{"Not An Image!"}, `localized image "Not An Image!" is not an image reference`},
		{[]string{"a.example/x/op:1", "b.example/y/op:2"}, `localized images "a.example/x/op:1" and "b.example/y/op:2" are both for image "op"`},
	} {
		podPath := []string{"spec", "template", "spec"}
		deployment := withContainers(object("apps/v1", "Deployment", "", "manager"), podPath, map[string][]string{"containers": {"op:1"}})
		opts := options()
		opts.LocalizedImages = tt.localized
		err := transform.Objects([]*unstructured.Unstructured{deployment}, opts)
		Expect(err).To(MatchError(ContainSubstring(tt.want)))
		Expect(images(deployment, podPath, "containers")).To(Equal([]string{"op:1"}))
		Expect(deployment.GetLabels()).To(BeEmpty(), "nothing changed")
	}
}

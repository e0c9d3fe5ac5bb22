package kyma

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/resolve"
)

func descriptorTemplate(resourceVersion, component string, images ...string) *v1beta2.ModuleTemplate {
	resources := `{"name":"raw-manifest","type":"yaml","access":{"type":"localBlob","localReference":"sha256:00"}}`
	for _, image := range images {
		resources += `,{"name":"image","type":"ociArtifact","relation":"external","access":{"type":"ociArtifact","imageReference":"` + image + `"}}`
	}
	raw := `{"meta":{"schemaVersion":"v2"},"component":{"name":"` + component + `","version":"1.0.0","resources":[` + resources + `]}}`
	return &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{UID: "t-uid", ResourceVersion: resourceVersion},
		Spec:       v1beta2.ModuleTemplateSpec{Descriptor: runtime.RawExtension{Raw: []byte(raw)}},
	}
}

// A template's descriptor gives the module's component (when its
// ModuleReleaseMeta names none) and its images (each once), read once per
// template revision; a template without a descriptor gives nothing.
func TestDescriptorFacts(t *testing.T) {
	g := NewWithT(t)
	memo := &descriptorMemo{}
	first := descriptorTemplate("1", "kyma-project.io/module/shop", "registry.example/prod/shop:1.0.0", "registry.example/prod/shop:1.0.0", "registry.example/prod/sidecar:2")
	g.Expect(memo.of(first)).To(Equal(descriptorFacts{
		component: "kyma-project.io/module/shop",
		images:    []string{"registry.example/prod/shop:1.0.0", "registry.example/prod/sidecar:2"},
	}))

	// Same revision: the remembered facts, not a new parse.
	sameRevision := descriptorTemplate("1", "kyma-project.io/module/other")
	g.Expect(memo.of(sameRevision).component).To(Equal("kyma-project.io/module/shop"))
	// A new revision is read again.
	g.Expect(memo.of(descriptorTemplate("2", "kyma-project.io/module/other")).component).To(Equal("kyma-project.io/module/other"))
	g.Expect(memo.of(&v1beta2.ModuleTemplate{})).To(Equal(descriptorFacts{}))

	modules := []resolve.Module{
		{Name: "shop", Template: descriptorTemplate("3", "kyma-project.io/module/shop")},
		{Name: "named", Template: descriptorTemplate("3", "kyma-project.io/module/shop"), OCMComponentName: "kyma-project.io/module/named"},
		{Name: "plain", Template: &v1beta2.ModuleTemplate{}},
	}
	memo.describeModules(modules)
	g.Expect(modules[0].OCMComponentName).To(Equal("kyma-project.io/module/shop"))
	g.Expect(modules[1].OCMComponentName).To(Equal("kyma-project.io/module/named"), "the ModuleReleaseMeta's name wins")
	g.Expect(modules[2].OCMComponentName).To(BeEmpty())
}

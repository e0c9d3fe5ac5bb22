package kyma

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
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
	of := func(template *v1beta2.ModuleTemplate) descriptorFacts {
		facts, err := memo.of(context.Background(), content.Templates{}, template)
		g.Expect(err).NotTo(HaveOccurred())
		return facts
	}
	first := descriptorTemplate("1", "kyma-project.io/module/shop", "registry.example/prod/shop:1.0.0", "registry.example/prod/shop:1.0.0", "registry.example/prod/sidecar:2")
	g.Expect(of(first)).To(Equal(descriptorFacts{
		component: "kyma-project.io/module/shop",
		images:    []string{"registry.example/prod/shop:1.0.0", "registry.example/prod/sidecar:2"},
	}))

	// Same revision: the remembered facts, not a new parse.
	sameRevision := descriptorTemplate("1", "kyma-project.io/module/other")
	g.Expect(of(sameRevision).component).To(Equal("kyma-project.io/module/shop"))
	// A new revision is read again.
	g.Expect(of(descriptorTemplate("2", "kyma-project.io/module/other")).component).To(Equal("kyma-project.io/module/other"))
	g.Expect(of(&v1beta2.ModuleTemplate{})).To(Equal(descriptorFacts{}))

	modules := []resolve.Module{
		{Name: "shop", Template: descriptorTemplate("3", "kyma-project.io/module/shop")},
		{Name: "named", Template: descriptorTemplate("3", "kyma-project.io/module/shop"), OCMComponentName: "kyma-project.io/module/named"},
		{Name: "plain", Template: &v1beta2.ModuleTemplate{}},
	}
	memo.describeModules(context.Background(), content.Templates{}, modules)
	g.Expect(modules[0].OCMComponentName).To(Equal("kyma-project.io/module/shop"))
	g.Expect(modules[1].OCMComponentName).To(Equal("kyma-project.io/module/named"), "the ModuleReleaseMeta's name wins")
	g.Expect(modules[2].OCMComponentName).To(BeEmpty())
}

// registryDescriptors stands in for the content pipeline's resolver: it
// hands out a descriptor read "from the registry", or fails, and counts
// the reads.
type registryDescriptors struct {
	raw   string
	err   error
	reads atomic.Int64
}

func (r *registryDescriptors) Resources(context.Context, *v1beta2.ModuleTemplate) ([]v1beta2.ContentResource, error) {
	return nil, errors.New("not asked for links")
}

func (r *registryDescriptors) Descriptor(context.Context, *v1beta2.ModuleTemplate) (*ocm.Descriptor, error) {
	r.reads.Add(1)
	if r.err != nil {
		return nil, r.err
	}
	return ocm.Parse([]byte(r.raw))
}

// A template without an embedded descriptor (KLM's, through
// --oci-registry-host) gets its images from the descriptor the resolver
// reads, once per revision; a failed read is an error and is read again
// next time, never remembered as "no images".
func TestDescriptorFactsFromTheRegistry(t *testing.T) {
	g := NewWithT(t)
	memo := &descriptorMemo{}
	embedded := descriptorTemplate("1", "kyma-project.io/module/klm", "registry.example/prod/klm:1.0.0")
	reader := &registryDescriptors{err: errors.New("registry down")}
	template := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{UID: "klm-uid", ResourceVersion: "1"}}

	_, err := memo.of(context.Background(), content.Templates{Descriptors: reader}, template)
	g.Expect(err).To(MatchError(ContainSubstring("registry down")))
	reader.err, reader.raw = nil, string(embedded.Spec.Descriptor.Raw)
	facts, err := memo.of(context.Background(), content.Templates{Descriptors: reader}, template)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(facts.images).To(Equal([]string{"registry.example/prod/klm:1.0.0"}))
	g.Expect(facts.component).To(Equal("kyma-project.io/module/klm"))
	_, _ = memo.of(context.Background(), content.Templates{Descriptors: reader}, template)
	g.Expect(reader.reads.Load()).To(BeEquivalentTo(2), "one failed read, one read for the revision")

	// A template with its own links (spec.resources) names no descriptor.
	withLinks := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{UID: "links", ResourceVersion: "1"},
		Spec: v1beta2.ModuleTemplateSpec{Resources: []v1beta2.ContentResource{{Name: "rawManifest", Link: "oci://example/x@sha256:00"}}}}
	facts, err = memo.of(context.Background(), content.Templates{Descriptors: reader}, withLinks)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(facts).To(Equal(descriptorFacts{}))
	g.Expect(reader.reads.Load()).To(BeEquivalentTo(2))

	// An empty descriptor ({}, as some tooling writes it) is none: the
	// registry's is read.
	empty := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{UID: "empty", ResourceVersion: "1"},
		Spec: v1beta2.ModuleTemplateSpec{Descriptor: runtime.RawExtension{Raw: []byte(" {} ")}}}
	facts, err = memo.of(context.Background(), content.Templates{Descriptors: reader}, empty)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(facts.images).To(Equal([]string{"registry.example/prod/klm:1.0.0"}))
	g.Expect(reader.reads.Load()).To(BeEquivalentTo(3))
}

// Reconciles of many Kymas that ask for a template revision's descriptor
// at the same time (after a restart, all at once) share one registry read.
func TestDescriptorFromTheRegistryReadOnceForConcurrentReconciles(t *testing.T) {
	g := NewWithT(t)
	memo := &descriptorMemo{}
	reader := &registryDescriptors{raw: string(descriptorTemplate("1", "kyma-project.io/module/klm", "registry.example/prod/klm:1.0.0").Spec.Descriptor.Raw)}
	template := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{UID: "klm-uid", ResourceVersion: "7"}}
	var wg sync.WaitGroup
	got := make([]descriptorFacts, 32)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = memo.of(context.Background(), content.Templates{Descriptors: reader}, template)
		})
	}
	wg.Wait()
	for i := range got {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(got[i].images).To(Equal([]string{"registry.example/prod/klm:1.0.0"}))
	}
	g.Expect(reader.reads.Load()).To(BeEquivalentTo(1))
}

package kyma

import (
	"context"
	"errors"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/ocm"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
)

// countingDescriptors derives one rawManifest link, or fails with err.
type countingDescriptors struct {
	calls int
	err   error
}

func (d *countingDescriptors) Resources(context.Context, *v1beta2.ModuleTemplate) ([]v1beta2.ContentResource, error) {
	d.calls++
	if d.err != nil {
		return nil, d.err
	}
	return []v1beta2.ContentResource{{Name: v1beta2.RawManifestResourceName, Link: "oci://reg.example/c@sha256:aa"}}, nil
}

func (d *countingDescriptors) Descriptor(context.Context, *v1beta2.ModuleTemplate) (*ocm.Descriptor, error) {
	return nil, errors.New("not asked for the descriptor")
}

// samePinner returns links as they are: they are pinned already.
type samePinner struct{}

func (samePinner) Pin(_ context.Context, res v1beta2.ContentResource) (v1beta2.ContentResource, error) {
	return res, nil
}

func TestPinnedResourcesFromDescriptor(t *testing.T) {
	klmTemplate := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: "shop-1.0.0"}}
	klmTemplate.Spec.Descriptor = runtime.RawExtension{Raw: []byte(`{"component":{"name":"kyma-project.io/module/shop"}}`)}
	withResources := klmTemplate.DeepCopy()
	withResources.Spec.Resources = []v1beta2.ContentResource{{Name: v1beta2.RawManifestResourceName, Link: "oci://reg.example/own@sha256:bb"}}
	pinned := func(revision string, resources ...v1beta2.ContentResource) *v1beta2.Manifest {
		m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{templateRevisionAnnotation: revision}}}
		m.Spec.Resources = resources
		return m
	}
	derived := v1beta2.ContentResource{Name: v1beta2.RawManifestResourceName, Link: "oci://reg.example/c@sha256:aa"}
	tests := []struct {
		name      string
		template  *v1beta2.ModuleTemplate
		existing  *v1beta2.Manifest
		want      []v1beta2.ContentResource
		wantCalls int
	}{
		{name: "derived from the descriptor", template: klmTemplate, want: []v1beta2.ContentResource{derived}, wantCalls: 1},
		{name: "the Manifest's pins at the same revision", template: klmTemplate, existing: pinned("r1", derived), want: []v1beta2.ContentResource{derived}},
		{name: "derived again at a new revision", template: klmTemplate, existing: pinned("r0", derived), want: []v1beta2.ContentResource{derived}, wantCalls: 1},
		{name: "derived when the Manifest has none", template: klmTemplate, existing: pinned("r1"), want: []v1beta2.ContentResource{derived}, wantCalls: 1},
		{name: "spec.resources win over the descriptor", template: withResources, want: withResources.Spec.Resources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := &countingDescriptors{}
			r := &Reconciler{Pinner: samePinner{}, Descriptors: d}
			got, err := r.pinnedResources(context.Background(), tt.template, "r1", tt.existing, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(d.calls).To(Equal(tt.wantCalls))
		})
	}
}

func TestPinnedResourcesDescriptorErrorNamesTheTemplate(t *testing.T) {
	g := NewWithT(t)
	template := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: "shop-1.0.0"}}
	template.Spec.Descriptor = runtime.RawExtension{Raw: []byte(`{"component":{}}`)}
	cause := errors.New("no resource raw-manifest")
	r := &Reconciler{Pinner: samePinner{}, Descriptors: &countingDescriptors{err: cause}}
	_, err := r.pinnedResources(context.Background(), template, "r1", nil, nil)
	g.Expect(err).To(MatchError(ContainSubstring("ModuleTemplate shop-1.0.0: no resource raw-manifest")))
	g.Expect(errors.Is(err, cause)).To(BeTrue())
}

// TestShardBucketAloneIsNoReasonToWrite: Manifests are created filed under
// their Kyma's shard bucket, but an older Manifest without the label is up
// to date all the same, so that an upgrade writes no Manifest for it (the
// shards' filer labels them, once, and only with shards); any other label
// that differs is a reason to write.
func TestShardBucketAloneIsNoReasonToWrite(t *testing.T) {
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "kyma-a", Namespace: "kcp", UID: "uid-a"}}
	desired := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "kyma-a-m", Namespace: "kcp", Labels: map[string]string{
		v1beta2.KymaNameLabel: "kyma-a", v1beta2.ShardBucketLabel: strconv.Itoa(shard.Bucket("kyma-a")),
	}}}
	scheme := runtime.NewScheme()
	if err := v1beta2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := controllerutil.SetControllerReference(kyma, desired, scheme); err != nil {
		t.Fatal(err)
	}
	unfiled := desired.DeepCopy()
	delete(unfiled.Labels, v1beta2.ShardBucketLabel)
	if !manifestUpToDate(kyma, unfiled, desired) {
		t.Error("a Manifest without the shard bucket label is written again")
	}
	other := unfiled.DeepCopy()
	other.Labels[v1beta2.KymaNameLabel] = "kyma-b"
	if manifestUpToDate(kyma, other, desired) {
		t.Error("a Manifest with another Kyma's label is taken as up to date")
	}
}

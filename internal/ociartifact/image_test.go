package ociartifact_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// An artifact built first and pushed later is the artifact Push writes:
// the same digest, the same links, each layer readable back by its title.
func TestNewImageThenPushImageIsPush(t *testing.T) {
	g := NewWithT(t)
	reg := testregistry.Start()
	defer reg.Close()
	ctx := context.Background()

	layers := moduleLayers()
	direct, err := ociartifact.Push(ctx, reg.Host()+"/modules/direct:1.0.0", layers, ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	img, err := ociartifact.NewImage(layers)
	g.Expect(err).NotTo(HaveOccurred())
	later, err := ociartifact.PushImage(ctx, reg.Host()+"/modules/direct:1.0.0", img, ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(later).To(Equal(direct))

	for _, l := range layers {
		data, err := ociartifact.LayerData(img, l.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(data).To(Equal(l.Data), l.Name)
	}
	missing, err := ociartifact.LayerData(img, "nope")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(BeNil())

	_, err = ociartifact.NewImage([]ociartifact.Layer{{Data: []byte("x")}})
	g.Expect(err).To(MatchError(ContainSubstring("needs a name")))
}

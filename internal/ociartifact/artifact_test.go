package ociartifact_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

func moduleLayers() []ociartifact.Layer {
	return ociartifact.Module{
		RawManifest: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sample\n"),
		CRDs:        []byte("kind: CustomResourceDefinition\n"),
		DefaultCR:   []byte("kind: Sample\n"),
		HelmChart:   bytes.Repeat([]byte{0x1f, 0x8b, 0, 1}, 4096),
	}.Layers()
}

func TestModuleLayersLeaveOutEmptyParts(t *testing.T) {
	g := NewWithT(t)
	layers := ociartifact.Module{RawManifest: []byte("a"), HelmChart: []byte("b")}.Layers()
	g.Expect(layers).To(HaveLen(2))
	g.Expect(layers[0].Name).To(Equal("rawManifest"))
	g.Expect(layers[1].Name).To(Equal("helmChart"))
	g.Expect(layers[1].MediaType).To(Equal(ociartifact.HelmChartMediaType))
}

func TestPushAndFetchByDigestRoundTrip(t *testing.T) {
	g := NewWithT(t)
	reg := testregistry.Start()
	defer reg.Close()
	ctx := context.Background()

	layers := moduleLayers()
	artifact, err := ociartifact.Push(ctx, reg.Host()+"/modules/sample:1.0.0", layers, ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(artifact.Ref).To(HavePrefix(reg.Host() + "/modules/sample@sha256:"))
	g.Expect(artifact.Links).To(HaveLen(len(layers)))

	for _, l := range layers {
		link := artifact.Links[l.Name]
		g.Expect(link).To(HavePrefix("oci://"+reg.Host()+"/modules/sample@sha256:"), l.Name)
		got, err := ociartifact.FetchLayer(ctx, link, ociartifact.Insecure())
		g.Expect(err).NotTo(HaveOccurred(), l.Name)
		g.Expect(got).To(Equal(l.Data), "layer %s must come back byte-identical", l.Name)
	}
}

func TestResolveTagPinsLayerDigest(t *testing.T) {
	g := NewWithT(t)
	reg := testregistry.Start()
	defer reg.Close()
	ctx := context.Background()

	artifact, err := ociartifact.Push(ctx, reg.Host()+"/modules/sample:1.0.0", moduleLayers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())

	pinned, err := ociartifact.ResolveTag(ctx, "oci://"+reg.Host()+"/modules/sample:1.0.0", "crds", ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pinned).To(Equal(artifact.Links["crds"]))

	// Moving the tag to new content changes nothing already pinned.
	changed := moduleLayers()
	changed[1].Data = []byte("kind: SomethingElse\n")
	_, err = ociartifact.Push(ctx, reg.Host()+"/modules/sample:1.0.0", changed, ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	got, err := ociartifact.FetchLayer(ctx, pinned, ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal("kind: CustomResourceDefinition\n"))

	_, err = ociartifact.ResolveTag(ctx, "oci://"+reg.Host()+"/modules/sample:1.0.0", "nope", ociartifact.Insecure())
	g.Expect(err).To(MatchError(ContainSubstring(`no layer "nope"`)))
}

func TestFetchLayerErrors(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	ctx := context.Background()
	missing := "oci://" + reg.Host() + "/modules/sample@sha256:" + strings.Repeat("ab", 32)

	tests := []struct {
		name string
		link string
		want string
	}{
		{name: "not an oci link", link: "https://example.invalid/x", want: "want oci://"},
		{name: "tag instead of digest", link: "oci://" + reg.Host() + "/modules/sample:1.0.0", want: "not pinned by digest"},
		{name: "missing layer", link: missing, want: "fetching"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := ociartifact.FetchLayer(ctx, tt.link, ociartifact.Insecure())
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestFetchLayerRegistryDownAndBack(t *testing.T) {
	g := NewWithT(t)
	reg := testregistry.Start()
	defer reg.Close()
	artifact, err := ociartifact.Push(context.Background(), reg.Host()+"/modules/sample:1.0.0", moduleLayers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())

	reg.Stop()
	_, err = ociartifact.FetchLayer(context.Background(), artifact.Links["rawManifest"], ociartifact.Insecure())
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))

	g.Expect(reg.Restart()).To(Succeed())
	data, err := ociartifact.FetchLayer(context.Background(), artifact.Links["rawManifest"], ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(HavePrefix("apiVersion: v1"))
}

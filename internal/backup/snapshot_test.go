package backup

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// format1 is a snapshot as format 1 wrote it: the runtime Kyma's modules
// and the modules' default custom resources.
const format1 = `{"format":1,"kyma":"k1","takenAt":"2026-01-05T01:00:00Z","labels":{"operator.kyma-project.io/beta":"true"},
"spec":{"channel":"regular","modules":[{"name":"sample"}]},
"runtimeModules":[{"name":"evolving"}],
"resources":[{"module":"sample","object":{"apiVersion":"operator.kyma-project.io/v1alpha1","kind":"Sample","metadata":{"name":"default","namespace":"kyma-system"},"spec":{"greeting":"hi"}}}]}`

func TestDecodeReadsFormat1(t *testing.T) {
	g := NewWithT(t)
	s, err := Decode([]byte(format1))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Format).To(Equal(1))
	g.Expect(s.RuntimeKyma).NotTo(BeNil())
	g.Expect(s.RuntimeKyma.Spec.Modules).To(ConsistOf(HaveField("Name", "evolving")))
	g.Expect(s.RuntimeModules).To(BeEmpty(), "moved into RuntimeKyma")
	g.Expect(s.Resources).To(ConsistOf(And(HaveField("Module", "sample"), HaveField("Default", true))), "format 1 held default custom resources only")
	g.Expect(s.Secrets).To(BeEmpty())
}

func TestDecodeRoundTripsAndRefusesUnknownFormats(t *testing.T) {
	g := NewWithT(t)
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("operator.kyma-project.io/v1alpha1")
	cr.SetKind("Sample")
	cr.SetName("mine")
	cr.SetNamespace("team-a")
	s := &Snapshot{Format: FormatVersion, Kyma: "k1", RuntimeKyma: &RuntimeKyma{Labels: map[string]string{"team": "a"}}, Resources: []Resource{{Module: "sample", Object: cr}}}
	data, err := s.Encode()
	g.Expect(err).NotTo(HaveOccurred())
	back, err := Decode(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.RuntimeKyma.Labels).To(Equal(map[string]string{"team": "a"}))
	g.Expect(back.Resources).To(ConsistOf(HaveField("Default", false)), "a format 2 resource is default only when it says so")

	for _, format := range []string{"0", "3"} {
		_, err := Decode([]byte(`{"format":` + format + `,"kyma":"k1"}`))
		g.Expect(err).To(MatchError(And(ContainSubstring("format "+format), ContainSubstring("reads 1 to 2"))))
	}
}

func TestEncodeRefusesWhatNoRestoreCouldRead(t *testing.T) {
	g := NewWithT(t)
	s := &Snapshot{Format: FormatVersion, Kyma: "k1", Annotations: map[string]string{"big": strings.Repeat("x", MaxSnapshotBytes)}}
	_, err := s.Encode()
	g.Expect(err).To(MatchError(ContainSubstring("more than the 15728640 a restore reads")))
}

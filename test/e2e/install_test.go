package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

func TestInstallToReady(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := newKyma(t, module(samplemodules.Sample), module(samplemodules.Chart))

	kyma := k.eventuallyReady(t)
	g.Expect(kyma.Status.Modules).To(HaveLen(2))
	for _, m := range kyma.Status.Modules {
		g.Expect(m.State).To(Equal(v1beta2.StateReady), m.Name)
		g.Expect(m.Version).To(Equal("1.0.0"), m.Name)
		g.Expect(m.Channel).To(Equal("regular"), m.Name)
		g.Expect(m.Manifest).NotTo(BeNil(), m.Name)
		g.Expect(m.Template).NotTo(BeNil(), m.Name)
	}

	// The module's CRD, manager and default CR are in the runtime, labelled
	// as ours.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(k.runtime.client.Get(context.Background(), client.ObjectKey{Name: "samples.operator.kyma-project.io"}, crd)).To(Succeed())
	g.Expect(crd.Labels).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue))

	deployment := &appsv1.Deployment{}
	g.Expect(k.inRuntime(deployment, "sample-manager")).To(Succeed())
	g.Expect(deployment.Labels).To(HaveKeyWithValue(v1beta2.KymaNameLabel, k.name))
	g.Expect(deployment.Labels).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, samplemodules.Sample))
	g.Expect(deployment.Status.AvailableReplicas).To(BeEquivalentTo(1))

	sample := &unstructured.Unstructured{}
	sample.SetGroupVersionKind(samplemodules.SampleResource.GroupVersion().WithKind("Sample"))
	g.Expect(k.inRuntime(sample, "default")).To(Succeed())
	state, _, _ := unstructured.NestedString(sample.Object, "status", "state")
	g.Expect(state).To(Equal("Ready"))

	// The chart was rendered with its values.
	settings := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(settings, "chart-settings")).To(Succeed())
	g.Expect(settings.Data).To(HaveKeyWithValue("greeting", "hello from the chart defaults"))

	// The Manifest's inventory lists what was applied.
	manifest := &v1beta2.Manifest{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-sample"}, manifest)).To(Succeed())
	g.Expect(manifest.Status.Synced).To(ContainElement(HaveField("Name", "sample-manager")))
	g.Expect(manifest.Spec.Resources).To(HaveEach(HaveField("Link", ContainSubstring("@sha256:"))))
}

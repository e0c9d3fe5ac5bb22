package kyma

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

func TestFieldsIgnored(t *testing.T) {
	plain := v1beta2.Module{Name: "plain", Managed: true}
	withController := v1beta2.Module{Name: "ctl", ControllerName: "manifest-controller", Managed: true}
	withRef := v1beta2.Module{Name: "ref", RemoteModuleTemplateRef: "kyma-system/ref", Managed: true}
	many := make([]v1beta2.Module, 0, 7)
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		many = append(many, v1beta2.Module{Name: name, ControllerName: "x"})
	}
	tests := []struct {
		name            string
		modules, inRT   []v1beta2.Module
		wantNone        bool
		wantMessageHas  []string
		wantMessageLack []string
	}{
		{name: "none set", modules: []v1beta2.Module{plain}, inRT: []v1beta2.Module{plain}, wantNone: true},
		{name: "no modules", wantNone: true},
		{name: "controller", modules: []v1beta2.Module{plain, withController},
			wantMessageHas: []string{"ignored: spec.modules[ctl].controller.", "remove these fields"}, wantMessageLack: []string{"plain"}},
		{name: "remoteModuleTemplateRef", modules: []v1beta2.Module{withRef},
			wantMessageHas: []string{"spec.modules[ref].remoteModuleTemplateRef"}},
		{name: "both on one module", modules: []v1beta2.Module{{Name: "both", ControllerName: "c", RemoteModuleTemplateRef: "r"}},
			wantMessageHas: []string{"spec.modules[both].controller, spec.modules[both].remoteModuleTemplateRef"}},
		{name: "in the runtime's Kyma", modules: []v1beta2.Module{plain}, inRT: []v1beta2.Module{withController},
			wantMessageHas: []string{"ignored: the runtime's Kyma spec.modules[ctl].controller"}},
		{name: "many are counted", modules: many,
			wantMessageHas: []string{"spec.modules[e].controller and 2 more"}, wantMessageLack: []string{"[f]", "[g]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := fieldsIgnored(tt.modules, tt.inRT)
			if tt.wantNone {
				g.Expect(c).To(BeNil())
				return
			}
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Type).To(Equal(ConditionFieldsIgnored))
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(ReasonAcceptedForCompatibility))
			for _, want := range tt.wantMessageHas {
				g.Expect(c.Message).To(ContainSubstring(want))
			}
			for _, lack := range tt.wantMessageLack {
				g.Expect(c.Message).NotTo(ContainSubstring(lack))
			}
		})
	}
}

// TestFieldsIgnoredLeavesTheKymaHealthAlone: the condition is neither a
// kstatus condition nor read into status.state, and it goes with the field.
func TestFieldsIgnoredLeavesTheKymaHealthAlone(t *testing.T) {
	g := NewWithT(t)
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: v1beta2.KymaSpec{
		Modules: []v1beta2.Module{{Name: "m", ControllerName: "manifest-controller", Managed: true}},
	}}
	recordOutcome(kyma, reconciler.Ready(ReasonReady, "All modules are ready", 0))
	g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady))
	c := meta.FindStatusCondition(kyma.Status.Conditions, ConditionFieldsIgnored)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.ObservedGeneration).To(Equal(int64(2)))

	kyma.Spec.Modules[0].ControllerName = ""
	recordOutcome(kyma, reconciler.Ready(ReasonReady, "All modules are ready", 0))
	g.Expect(meta.FindStatusCondition(kyma.Status.Conditions, ConditionFieldsIgnored)).To(BeNil())
}

// TestIgnoredFieldIsShownOnTheKyma applies, on a real API server, a Kyma
// whose module sets controller and remoteModuleTemplateRef as a resource
// written for the Kyma lifecycle-manager would: it is accepted, installs
// like any other, and says in FieldsIgnored that the fields have no effect
// until they are removed.
func TestIgnoredFieldIsShownOnTheKyma(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	op := startOperatorUnderTest(t)
	shop := module(t, "shop")
	k := newRemovalKyma(t, op, shop)

	kyma := k.get()
	kyma.Spec.Modules[0].ControllerName = "manifest-controller"
	kyma.Spec.Modules[0].RemoteModuleTemplateRef = "kyma-system/" + shop
	g.Expect(removalsEnv.client.Update(context.Background(), kyma)).To(Succeed(), "accepted for compatibility")
	k.install(shop)

	kyma = k.get()
	g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), "the fields change nothing")
	c := meta.FindStatusCondition(kyma.Status.Conditions, ConditionFieldsIgnored)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(ReasonAcceptedForCompatibility))
	g.Expect(c.Message).To(ContainSubstring("spec.modules[" + shop + "].controller, spec.modules[" + shop + "].remoteModuleTemplateRef"))

	kyma.Spec.Modules[0].ControllerName = ""
	kyma.Spec.Modules[0].RemoteModuleTemplateRef = ""
	g.Expect(removalsEnv.client.Update(context.Background(), kyma)).To(Succeed())
	k.reconcile()
	kyma = k.get()
	g.Expect(meta.FindStatusCondition(kyma.Status.Conditions, ConditionFieldsIgnored)).To(BeNil(), "gone with the fields")
	g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady))
}

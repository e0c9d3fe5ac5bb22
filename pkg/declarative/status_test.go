package declarative

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(kind, name string, status map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": kind, "metadata": map[string]any{"name": name, "generation": int64(1)}}}
	if kind == "ConfigMap" {
		o.SetAPIVersion("v1")
	}
	if status != nil {
		o.Object["status"] = status
	}
	return o
}

func TestStatusOf(t *testing.T) {
	available := map[string]any{"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1),
		"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}
	tests := []struct {
		name    string
		objects []*unstructured.Unstructured
		want    State
		reason  string
	}{
		{"nothing to apply is ready", nil, StateReady, ReasonInstalled},
		{"a ConfigMap is ready once applied", []*unstructured.Unstructured{object("ConfigMap", "a", nil)}, StateReady, ReasonInstalled},
		{"a Deployment without status is processing", []*unstructured.Unstructured{object("ConfigMap", "a", nil), object("Deployment", "d", nil)}, StateProcessing, ReasonProgressing},
		{"an available Deployment is ready", []*unstructured.Unstructured{object("Deployment", "d", available)}, StateReady, ReasonInstalled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := statusOf(tt.objects)
			g.Expect(s.State).To(Equal(tt.want), s.Message)
			g.Expect(s.Reason).To(Equal(tt.reason))
			g.Expect(s.Message).NotTo(BeEmpty())
		})
	}
}

// The Ready condition's transition time moves only when its status does,
// so that a resource reconciled again writes nothing.
func TestSetStatusKeepsTheTransitionTime(t *testing.T) {
	g := NewWithT(t)
	obj := object("Sample", "s", nil)
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g.Expect(setStatus(obj, Status{State: StateProcessing, Reason: ReasonProgressing, Message: "Waiting"}, t0)).To(Succeed())
	g.Expect(obj.Object["status"]).NotTo(HaveKey("observedGeneration"), "set on success only")
	t1 := metav1.NewTime(t0.Add(time.Minute))
	g.Expect(setStatus(obj, Status{State: StateProcessing, Reason: ReasonProgressing, Message: "Waiting more"}, t1)).To(Succeed())
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	g.Expect(conds).To(HaveLen(1))
	g.Expect(conds[0]).To(HaveKeyWithValue("lastTransitionTime", "2026-01-01T00:00:00Z"))
	g.Expect(setStatus(obj, Status{State: StateReady, Reason: ReasonInstalled, Message: "ok"}, t1)).To(Succeed())
	conds, _, _ = unstructured.NestedSlice(obj.Object, "status", "conditions")
	g.Expect(conds[0]).To(HaveKeyWithValue("lastTransitionTime", "2026-01-01T00:01:00Z"))
	g.Expect(conds[0]).To(HaveKeyWithValue("status", "True"))
	state, _, _ := unstructured.NestedString(obj.Object, "status", "state")
	g.Expect(state).To(Equal("Ready"))
	g.Expect(obj.Object["status"]).To(HaveKeyWithValue("observedGeneration", int64(1)))
}

package manifest

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

func TestSetReadiness(t *testing.T) {
	tests := []struct {
		name       string
		readiness  apply.Readiness
		wantState  v1beta2.State
		wantReason string
		wantTrue   bool
	}{
		{name: "ready", readiness: apply.Readiness{State: v1beta2.StateReady}, wantState: v1beta2.StateReady, wantReason: reasonReady, wantTrue: true},
		{name: "processing", readiness: apply.Readiness{State: v1beta2.StateProcessing, Message: "Deployment x is not ready"}, wantState: v1beta2.StateProcessing, wantReason: reasonProcessing},
		{name: "warning", readiness: apply.Readiness{State: v1beta2.StateWarning, Message: "w"}, wantState: v1beta2.StateWarning, wantReason: reasonWarning},
		{name: "error", readiness: apply.Readiness{State: v1beta2.StateError, Message: "e"}, wantState: v1beta2.StateError, wantReason: reasonModuleError},
		{name: "deleting CR counts as processing", readiness: apply.Readiness{State: v1beta2.StateDeleting, Message: "d"}, wantState: v1beta2.StateProcessing, wantReason: reasonProcessing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &v1beta2.Manifest{}
			setReadiness(m, tt.readiness)
			g.Expect(m.Status.State).To(Equal(tt.wantState))
			cond := meta.FindStatusCondition(m.Status.Conditions, ConditionReady)
			g.Expect(cond.Reason).To(Equal(tt.wantReason))
			g.Expect(cond.Status == metav1.ConditionTrue).To(Equal(tt.wantTrue))
			g.Expect(m.Status.LastOperation.Operation).NotTo(BeEmpty())
		})
	}
}

func TestSetStateDoesNotTouchLastOperationWhenUnchanged(t *testing.T) {
	g := NewWithT(t)
	m := &v1beta2.Manifest{}
	setState(m, v1beta2.StateError, reasonContentFailed, "fetching: boom")
	first := m.Status.DeepCopy()
	setState(m, v1beta2.StateError, reasonContentFailed, "fetching: boom")
	g.Expect(m.Status).To(Equal(*first))
}

func TestDefaultCustomResource(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Sample", "metadata": map[string]any{"name": "default"},
	}}
	namespaced := func(schema.GroupVersionKind) (bool, error) { return true, nil }
	clusterScoped := func(schema.GroupVersionKind) (bool, error) { return false, nil }
	tests := []struct {
		name    string
		policy  v1beta2.CustomResourcePolicy
		scope   func(schema.GroupVersionKind) (bool, error)
		wantNil bool
		wantNS  string
	}{
		{name: "create and delete, namespaced", policy: v1beta2.CustomResourcePolicyCreateAndDelete, scope: namespaced, wantNS: "sync-ns"},
		{name: "create and delete, cluster-scoped", policy: v1beta2.CustomResourcePolicyCreateAndDelete, scope: clusterScoped, wantNS: ""},
		{name: "ignore", policy: v1beta2.CustomResourcePolicyIgnore, scope: namespaced, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &v1beta2.Manifest{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1beta2.KymaNameLabel: "k"}},
				Spec:       v1beta2.ManifestSpec{ModuleName: "sample", Resource: cr, CustomResourcePolicy: tt.policy},
			}
			got, err := defaultCustomResource(m, "sync-ns", tt.scope)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.wantNil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got.GetNamespace()).To(Equal(tt.wantNS))
			g.Expect(got.GetLabels()).To(HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue))
			g.Expect(got.GetLabels()).To(HaveKeyWithValue(v1beta2.KymaNameLabel, "k"))
			g.Expect(cr.GetNamespace()).To(BeEmpty(), "the Manifest's copy is not changed")
		})
	}
}

func TestNamespaceUse(t *testing.T) {
	manifest := func(uid string, deleting bool, synced ...v1beta2.Resource) v1beta2.Manifest {
		m := v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		if deleting {
			now := metav1.Now()
			m.DeletionTimestamp = &now
		}
		m.Status.Synced = synced
		return m
	}
	in := func(namespace string) v1beta2.Resource {
		return v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: namespace, Name: "c"}
	}
	namespaceEntry := v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "shared"}
	self := manifest("self", true, in("shared"), namespaceEntry)
	withCR := manifest("cr", false)
	withCR.Spec.Resource = &unstructured.Unstructured{}
	withCR.Spec.Resource.SetNamespace("shared")
	tests := []struct {
		name   string
		others []v1beta2.Manifest
		want   apply.NamespaceUse
	}{
		{name: "alone", others: []v1beta2.Manifest{self}, want: apply.NamespaceFree},
		{name: "others elsewhere", others: []v1beta2.Manifest{self, manifest("b", false, in("other"))}, want: apply.NamespaceFree},
		{name: "another that only ships the Namespace itself does not hold it", others: []v1beta2.Manifest{self, manifest("b", false, namespaceEntry)}, want: apply.NamespaceFree},
		{name: "a staying module has objects in it", others: []v1beta2.Manifest{self, manifest("b", false, in("shared"))}, want: apply.NamespaceInUse},
		{name: "a staying module's default CR is in it", others: []v1beta2.Manifest{self, withCR}, want: apply.NamespaceInUse},
		{name: "only leaving modules have objects in it", others: []v1beta2.Manifest{self, manifest("b", true, in("shared"))}, want: apply.NamespaceInUseByLeaving},
		{name: "a staying one wins over a leaving one", others: []v1beta2.Manifest{manifest("b", true, in("shared")), manifest("c", false, in("shared"))}, want: apply.NamespaceInUse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(namespaceUse(&self, tt.others, "shared")).To(Equal(tt.want))
		})
	}
}

package backup

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
)

func TestAddRuntimeChoices(t *testing.T) {
	backedUp := &backup.RuntimeKyma{
		Labels:      map[string]string{"team": "a", "shared": "backup's"},
		Annotations: map[string]string{"note": "n"},
		Spec: v1beta2.KymaSpec{
			Channel: "fast", SkipMaintenanceWindows: true, Debug: new(true),
			Modules: []v1beta2.Module{{Name: "evolving", Channel: "fast"}, {Name: "sample", Channel: "fast"}},
		},
	}
	for _, tt := range []struct {
		name        string
		live        v1beta2.Kyma
		wantChanged []string
		check       func(g Gomega, k *v1beta2.Kyma)
	}{
		{
			name: "a new runtime Kyma gets every choice",
			live: v1beta2.Kyma{Spec: v1beta2.KymaSpec{Channel: "regular"}},
			wantChanged: []string{
				"modules evolving, sample", "channel fast", "skipMaintenanceWindows", "debug true",
				"labels shared, team", "annotations note",
			},
			check: func(g Gomega, k *v1beta2.Kyma) {
				g.Expect(k.Spec.Modules).To(HaveExactElements(HaveField("Name", "evolving"), HaveField("Name", "sample")))
				g.Expect(k.Labels).To(Equal(map[string]string{"team": "a", "shared": "backup's"}))
			},
		},
		{
			name: "what it has stays: a listed module's entry, a label's value",
			live: v1beta2.Kyma{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"shared": "the new runtime's"}},
				Spec:       v1beta2.KymaSpec{Channel: "fast", Modules: []v1beta2.Module{{Name: "sample", Channel: "regular"}}},
			},
			wantChanged: []string{"modules evolving", "skipMaintenanceWindows", "debug true", "labels team", "annotations note"},
			check: func(g Gomega, k *v1beta2.Kyma) {
				g.Expect(k.Spec.Modules).To(HaveExactElements(HaveField("Channel", "regular"), HaveField("Name", "evolving")))
				g.Expect(k.Labels).To(HaveKeyWithValue("shared", "the new runtime's"))
			},
		},
		{
			name: "nothing to add is no change",
			live: v1beta2.Kyma{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "b", "shared": "x"}, Annotations: map[string]string{"note": "other"}},
				Spec:       *backedUp.Spec.DeepCopy(),
			},
			wantChanged: nil,
			check: func(g Gomega, k *v1beta2.Kyma) {
				g.Expect(k.Labels).To(HaveKeyWithValue("team", "b"))
				g.Expect(k.Annotations).To(HaveKeyWithValue("note", "other"))
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			k := tt.live.DeepCopy()
			g.Expect(addRuntimeChoices(k, backedUp)).To(Equal(tt.wantChanged))
			if tt.check != nil {
				tt.check(g, k)
			}
		})
	}
}

func TestResultTable(t *testing.T) {
	g := NewWithT(t)
	res := Result{Kyma: "k1", Backup: "20261201T100000Z", Format: 2, Objects: []ObjectResult{
		{Kind: "Namespace", Name: "team-a", Action: Created},
		{Kind: "Secret", Namespace: "team-a", Name: "db", Action: Skipped, Reason: "exists"},
		{Kind: "Sample", Namespace: "team-a", Name: "mine", Module: "sample", Action: Failed, Reason: "the runtime does not serve it"},
	}}
	var out bytes.Buffer
	g.Expect(res.WriteTable(&out)).To(Succeed())
	g.Expect(out.String()).To(And(
		MatchRegexp(`OBJECT\s+MODULE\s+RESULT\s+REASON`),
		MatchRegexp(`Namespace team-a\s+created`),
		MatchRegexp(`Secret team-a/db\s+skipped\s+exists`),
		MatchRegexp(`Sample team-a/mine\s+sample\s+failed\s+the runtime does not serve it`),
		ContainSubstring("Restored backup 20261201T100000Z (format 2) of Kyma k1: 1 created, 0 updated, 1 skipped, 1 failed"),
	))
	g.Expect(res.Failed()).To(Equal(1))
}

func TestUntouchedDefault(t *testing.T) {
	for _, tt := range []struct {
		name     string
		managers []metav1.ManagedFieldsEntry
		want     bool
	}{
		{"only the operator", []metav1.ManagedFieldsEntry{{Manager: apply.FieldManager}, {Manager: apply.OwnershipFieldManager}}, true},
		{"the module's operator writes status only", []metav1.ManagedFieldsEntry{{Manager: apply.FieldManager}, {Manager: "sample-operator", Subresource: "status"}}, true},
		{"the owner edited it", []metav1.ManagedFieldsEntry{{Manager: apply.FieldManager}, {Manager: "kubectl-edit"}}, false},
		{"an earlier restore wrote it", []metav1.ManagedFieldsEntry{{Manager: apply.FieldManager}, {Manager: FieldManager}}, false},
		{"nothing to tell by", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			obj.SetManagedFields(tt.managers)
			NewWithT(t).Expect(untouchedDefault(obj)).To(Equal(tt.want))
		})
	}
}

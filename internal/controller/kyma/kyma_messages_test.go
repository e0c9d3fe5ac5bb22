package kyma

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// TestLongManifestMessageIsStoredBounded has the Manifest report Error with
// a message as long as its CRD lets a condition be (a module's operator may
// write that much in its custom resource's status, which the Manifest
// quotes): the Kyma stores the module's message cut to
// v1beta2.MaxMessageLength characters, with a marker.
func TestLongManifestMessageIsStoredBounded(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	op := startOperatorUnderTest(t)
	loud := module(t, "loud")
	k := newRemovalKyma(t, op, loud)
	for range 2 { // the first reconcile may stop after adding the finalizer
		k.reconcile()
	}

	long := "Sample kyma-system/default reports Error: " + strings.Repeat("Ошибка модуля, ", 2000)
	m, ok := k.manifest(loud)
	g.Expect(ok).To(BeTrue())
	m.Status.State = v1beta2.StateError
	m.Status.ObservedGeneration = m.Generation
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: v1beta2.ConditionReady, Status: metav1.ConditionFalse, Reason: "ModuleError", Message: long, ObservedGeneration: m.Generation,
	})
	g.Expect(removalsEnv.client.Status().Update(context.Background(), m)).To(Succeed())

	k.reconcile()
	stored := entry(k.get(), loud)
	g.Expect(stored).NotTo(BeNil())
	g.Expect(stored.State).To(Equal(v1beta2.StateError))
	g.Expect(utf8.RuneCountInString(stored.Message)).To(Equal(v1beta2.MaxMessageLength))
	g.Expect(stored.Message).To(HavePrefix("Sample kyma-system/default reports Error: Ошибка модуля"))
	g.Expect(stored.Message).To(HaveSuffix(" … (truncated)"))
}

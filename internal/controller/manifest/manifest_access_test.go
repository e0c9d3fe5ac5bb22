package manifest

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// With --undeclared-module-access=refuse, a module that declares no RBAC is
// refused before anything touches its runtime: Error, with a message that
// says what to publish.
func TestUndeclaredModuleIsRefusedWhenTheOperatorRefusesThem(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{Access: AccessOptions{Undeclared: UndeclaredRefuse, TokenTTL: time.Hour}, Intervals: testIntervals}
	m := &v1beta2.Manifest{Spec: v1beta2.ManifestSpec{ModuleName: "loose"}}
	_, _, o, ok := r.prepareWriter(context.Background(), nil, m, nil)
	g.Expect(ok).To(BeFalse())
	g.Expect(o.Kind).To(Equal(reconciler.KindStalled))
	g.Expect(o.Reason).To(Equal(ReasonAccessRefused))
	g.Expect(o.Message).To(ContainSubstring("Module loose declares no RBAC"))
	g.Expect(o.Message).To(ContainSubstring("Publish the module with spec.rbac"))
	g.Expect(o.After).To(Equal(testIntervals.Error))
}

// A refusal of the module identity's write names the object the runtime
// refused, from the refusal's details; any other error is not a refusal.
func TestAccessRefusedNamesTheObject(t *testing.T) {
	g := NewWithT(t)
	declared := &v1beta2.Manifest{Spec: v1beta2.ManifestSpec{RBAC: &v1beta2.ModuleRBAC{}}}
	refusal := apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, "notes-admin", nil)
	o, ok := accessRefused(declared, refusal, testIntervals)
	g.Expect(ok).To(BeTrue())
	g.Expect(o.Kind).To(Equal(reconciler.KindStalled))
	g.Expect(o.Message).To(ContainSubstring(`clusterrolebindings.rbac.authorization.k8s.io "notes-admin"`))

	// A create names no object in its request: the refusal names the kind.
	create := apierrors.NewForbidden(schema.GroupResource{Group: "operator.kyma-project.io", Resource: "samples"}, "", nil)
	o, ok = accessRefused(declared, create, testIntervals)
	g.Expect(ok).To(BeTrue())
	g.Expect(o.Message).To(ContainSubstring("write a new object of samples.operator.kyma-project.io"))

	_, ok = accessRefused(declared, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", nil), testIntervals)
	g.Expect(ok).To(BeFalse())
	_, ok = accessRefused(&v1beta2.Manifest{}, refusal, testIntervals)
	g.Expect(ok).To(BeFalse(), "a module written as admin has no identity to refuse")
}

// A control-plane module's token is due when it has none, and again once
// less than the renew-before margin is left of it.
func TestTokenDue(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{Access: AccessOptions{TokenTTL: time.Hour}}
	now := time.Now()
	m := &v1beta2.Manifest{Spec: v1beta2.ManifestSpec{OperatorKubeconfig: true, RBAC: &v1beta2.ModuleRBAC{
		NamespacedRules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}}}
	g.Expect(r.tokenDue(m, now)).To(BeTrue(), "no token yet")
	m.Status.Access = &v1beta2.ModuleAccess{Identity: "lifecycle-manager-identities/x.kyma-system", TokenExpires: &metav1.Time{Time: now.Add(time.Hour)}}
	g.Expect(r.tokenDue(m, now)).To(BeFalse())
	until, ok := r.untilTokenDue(m, now)
	g.Expect(ok).To(BeTrue())
	g.Expect(until).To(Equal(30*time.Minute), "renewed halfway through its life by default")
	g.Expect(r.tokenDue(m, now.Add(31*time.Minute))).To(BeTrue())

	m.Spec.OperatorKubeconfig = false
	g.Expect(r.tokenDue(m, now.Add(31*time.Minute))).To(BeFalse(), "a runtime module has no token")
}

func TestAccessOptionsValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(AccessOptions{Undeclared: UndeclaredAdmin, TokenTTL: time.Hour}.Validate()).To(Succeed())
	g.Expect(AccessOptions{Undeclared: "sometimes", TokenTTL: time.Hour}.Validate()).To(MatchError(ContainSubstring("use admin or refuse")))
	g.Expect(AccessOptions{TokenTTL: time.Minute}.Validate()).To(MatchError(ContainSubstring("tokens for 10m0s at least")))
	g.Expect(AccessOptions{TokenTTL: time.Hour, TokenRenewBefore: time.Hour}.Validate()).To(MatchError(ContainSubstring("shorter than --module-token-ttl")))
}

package apply

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

var owner = Owner{Kyma: "kyma-1", Module: "first", Manifest: "kcp-system/kyma-1-first", SyncNamespace: "kyma-system"}

func labelsOf(kyma, module string) map[string]string {
	return map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: kyma, v1beta2.ModuleNameLabel: module}
}

func TestOwns(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{name: "all three labels match", labels: labelsOf("kyma-1", "first"), want: true},
		{name: "no labels", labels: nil},
		{name: "another module", labels: labelsOf("kyma-1", "second")},
		{name: "another Kyma", labels: labelsOf("kyma-2", "first")},
		{name: "managed-by only (the operator's own)", labels: map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue}},
		{name: "module labels without managed-by", labels: map[string]string{v1beta2.KymaNameLabel: "kyma-1", v1beta2.ModuleNameLabel: "first"}},
		{name: "another manager's value", labels: map[string]string{v1beta2.ManagedByLabel: "helm", v1beta2.KymaNameLabel: "kyma-1", v1beta2.ModuleNameLabel: "first"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(owner.Owns(tt.labels)).To(Equal(tt.want))
		})
	}
}

func TestClaimFor(t *testing.T) {
	configMap := Object{Kind: "ConfigMap", Namespace: "kyma-system", Name: "c"}
	adoptable := configMap
	adoptable.Adopt = true
	namespace := Object{Kind: "Namespace", Name: "own-ns"}
	syncNamespace := Object{Kind: "Namespace", Name: "kyma-system"}
	meta := func(labels, annotations map[string]string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Labels: labels, Annotations: annotations}
	}
	tests := []struct {
		name       string
		desired    Object
		live       *metav1.ObjectMeta
		want       Claim
		wantHolder string
	}{
		{name: "absent is created", desired: configMap, want: ClaimCreate},
		{name: "ours is ours", desired: configMap, live: meta(labelsOf("kyma-1", "first"), nil), want: ClaimOwned},
		{name: "runtime owner's is a conflict", desired: configMap, live: meta(map[string]string{"app": "x"}, nil),
			want: ClaimConflict, wantHolder: "not created by lifecycle-manager"},
		{name: "another module's is a conflict", desired: configMap, live: meta(labelsOf("kyma-1", "second"), nil),
			want: ClaimConflict, wantHolder: "module second's"},
		{name: "another Kyma's is a conflict", desired: configMap, live: meta(labelsOf("kyma-2", "first"), nil),
			want: ClaimConflict, wantHolder: "module first's of Kyma kyma-2"},
		{name: "the operator's own is a conflict", desired: configMap, live: meta(map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue}, nil),
			want: ClaimConflict, wantHolder: "lifecycle-manager's own, not a module's"},
		{name: "runtime owner's with consent from both sides is adopted", desired: adoptable,
			live: meta(nil, map[string]string{v1beta2.AdoptableByAnnotation: "first"}), want: ClaimAdopt},
		{name: "the module asking alone does not adopt", desired: adoptable, live: meta(nil, nil),
			want: ClaimConflict, wantHolder: "the runtime owner's; the module asks to adopt it, and the runtime owner has not consented with " + v1beta2.AdoptableByAnnotation + ": first on it"},
		{name: "consent for another module does not adopt", desired: adoptable,
			live: meta(nil, map[string]string{v1beta2.AdoptableByAnnotation: "second"}),
			want: ClaimConflict, wantHolder: "the runtime owner's; the module asks to adopt it, and the runtime owner has not consented with " + v1beta2.AdoptableByAnnotation + ": first on it"},
		{name: "consent alone does not adopt", desired: configMap,
			live: meta(nil, map[string]string{v1beta2.AdoptableByAnnotation: "first"}), want: ClaimConflict, wantHolder: "not created by lifecycle-manager"},
		{name: "a namespace is never adopted", desired: Object{Kind: "Namespace", Name: "owners", Adopt: true},
			live: meta(nil, map[string]string{v1beta2.AdoptableByAnnotation: "first"}), want: ClaimUseAsIs},
		{name: "another module's is never adopted", desired: adoptable, live: meta(labelsOf("kyma-1", "second"), nil),
			want: ClaimConflict, wantHolder: "module second's"},
		{name: "released by this Manifest is taken back", desired: configMap,
			live: meta(nil, map[string]string{v1beta2.OwnedByAnnotation: "kcp-system/kyma-1-first"}), want: ClaimOwned},
		{name: "released by another Manifest is a conflict", desired: configMap,
			live: meta(nil, map[string]string{v1beta2.OwnedByAnnotation: "kcp-system/kyma-1-second"}),
			want: ClaimConflict, wantHolder: "not created by lifecycle-manager"},
		{name: "sync namespace is used as it is even when absent", desired: syncNamespace, want: ClaimUseAsIs},
		{name: "sync namespace is never taken back", desired: syncNamespace, live: meta(labelsOf("kyma-1", "first"), nil), want: ClaimUseAsIs},
		{name: "new namespace is created", desired: namespace, want: ClaimCreate},
		{name: "own namespace is ours", desired: namespace, live: meta(labelsOf("kyma-1", "first"), nil), want: ClaimOwned},
		{name: "runtime owner's namespace is used as it is", desired: namespace, live: meta(nil, nil), want: ClaimUseAsIs},
		{name: "another module's namespace is used as it is", desired: namespace, live: meta(labelsOf("kyma-1", "second"), nil), want: ClaimUseAsIs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			claim, holder := ClaimFor(tt.desired, tt.live, owner)
			g.Expect(claim).To(Equal(tt.want))
			g.Expect(holder).To(Equal(tt.wantHolder))
		})
	}
}

func TestDisposalFor(t *testing.T) {
	resource := func(kind, namespace, name string) v1beta2.Resource {
		return v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: kind}, Namespace: namespace, Name: name}
	}
	configMap := resource("ConfigMap", "kyma-system", "c")
	ours := &metav1.ObjectMeta{Labels: labelsOf("kyma-1", "first")}
	tests := []struct {
		name     string
		resource v1beta2.Resource
		live     *metav1.ObjectMeta
		want     Disposal
	}{
		{name: "gone", resource: configMap, want: DisposeGone},
		{name: "ours is deleted", resource: configMap, live: ours, want: DisposeDelete},
		{name: "adopted is released", resource: configMap, live: &metav1.ObjectMeta{Labels: labelsOf("kyma-1", "first"),
			Annotations: map[string]string{v1beta2.AdoptedAnnotation: "true"}}, want: DisposeRelease},
		{name: "managed-by alone is not ours", resource: configMap, live: &metav1.ObjectMeta{Labels: map[string]string{v1beta2.ManagedByLabel: v1beta2.ManagedByValue}}, want: DisposeLeave},
		{name: "another module's is left", resource: configMap, live: &metav1.ObjectMeta{Labels: labelsOf("kyma-1", "second")}, want: DisposeLeave},
		{name: "runtime owner's is left", resource: configMap, live: &metav1.ObjectMeta{}, want: DisposeLeave},
		{name: "own namespace is deleted", resource: resource("Namespace", "", "own-ns"), live: ours, want: DisposeDelete},
		{name: "sync namespace is never deleted, even labelled ours", resource: resource("Namespace", "", "kyma-system"), live: ours, want: DisposeRelease},
		{name: "kube-system is never deleted", resource: resource("Namespace", "", "kube-system"), live: ours, want: DisposeRelease},
		{name: "the runtime owner's namespace is left", resource: resource("Namespace", "", "own-ns"), live: &metav1.ObjectMeta{}, want: DisposeLeave},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(DisposalFor(tt.resource, tt.live, owner)).To(Equal(tt.want))
		})
	}
}

func TestConflictErrorNamesObjectsAndWhatToDo(t *testing.T) {
	g := NewWithT(t)
	err := &ConflictError{Conflicts: []Conflict{
		{Object: "ConfigMap kyma-system/b", Holder: "not created by lifecycle-manager"},
		{Object: "ClusterRole a", Holder: "module second's"},
	}}
	g.Expect(err.Error()).To(HavePrefix("2 objects of the module are not its own to write: ClusterRole a (module second's), ConfigMap kyma-system/b (not created by lifecycle-manager)."))
	g.Expect(err.Error()).To(ContainSubstring(`operator.kyma-project.io/adopt: "true"`))

	many := &ConflictError{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		many.Conflicts = append(many.Conflicts, Conflict{Object: "ConfigMap ns/" + name, Holder: "x"})
	}
	g.Expect(many.Error()).To(ContainSubstring("ConfigMap ns/j (x), and 2 more."))
	g.Expect(many.Error()).NotTo(ContainSubstring("ns/k"))
}

func TestRemovalOrderPutsNamespacesLast(t *testing.T) {
	r := func(kind, name string) v1beta2.Resource {
		return v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Kind: kind}, Name: name}
	}
	got := removalOrder([]v1beta2.Resource{r("CustomResourceDefinition", "crd"), r("Namespace", "ns"), r("ClusterRole", "role"), r("Deployment", "manager")})
	NewWithT(t).Expect(got).To(Equal([]v1beta2.Resource{r("Deployment", "manager"), r("ClusterRole", "role"), r("CustomResourceDefinition", "crd"), r("Namespace", "ns")}))
}

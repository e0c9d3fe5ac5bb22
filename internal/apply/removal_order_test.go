package apply

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func res(group, kind, namespace, name string) v1beta2.Resource {
	return v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Namespace: namespace, Name: name}
}

// TestRemovalOrder checks the safe order of removing a module's inventory:
// instances of its own CRDs first (their operator still runs), then the
// rest in reverse apply order, Namespaces, and CRDs last (deleting a CRD
// deletes its instances, so it must not go while anything needs it).
func TestRemovalOrder(t *testing.T) {
	crd := res("apiextensions.k8s.io", "CustomResourceDefinition", "", "samples.operator.example")
	otherCRD := res("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets.widgets.example")
	ns := res("", "Namespace", "", "template-operator-system")
	role := res("rbac.authorization.k8s.io", "ClusterRole", "", "manager-role")
	deployment := res("apps", "Deployment", "template-operator-system", "manager")
	shipped := res("operator.example", "Sample", "template-operator-system", "shipped")
	widget := res("widgets.example", "Widget", "", "w")
	foreign := res("unrelated.example", "Thing", "", "t") // a kind whose CRD the module does not ship

	tests := []struct {
		name      string
		inventory []v1beta2.Resource
		want      []v1beta2.Resource
	}{
		{
			name:      "template-operator as rendered: CRD first, instance last",
			inventory: []v1beta2.Resource{crd, ns, role, deployment, shipped},
			want:      []v1beta2.Resource{shipped, deployment, role, ns, crd},
		},
		{
			name:      "CRDs go last even when rendered last",
			inventory: []v1beta2.Resource{ns, deployment, shipped, crd},
			want:      []v1beta2.Resource{shipped, deployment, ns, crd},
		},
		{
			name:      "instances of every own CRD first; other custom kinds are the rest",
			inventory: []v1beta2.Resource{crd, otherCRD, foreign, shipped, widget, deployment},
			want:      []v1beta2.Resource{widget, shipped, deployment, foreign, otherCRD, crd},
		},
		{
			name:      "without CRDs: reverse order, Namespaces last",
			inventory: []v1beta2.Resource{ns, role, deployment},
			want:      []v1beta2.Resource{deployment, role, ns},
		},
		{name: "empty", inventory: nil, want: []v1beta2.Resource{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(removalOrder(tt.inventory)).To(Equal(tt.want))
		})
	}
}

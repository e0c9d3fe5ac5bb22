package drift_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/drift"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

func TestFingerprintDescribesOnlyTheSameManifestInTheSameRuntime(t *testing.T) {
	runtime := remote.Identity{SecretUID: "s1", Server: "https://r1"}
	base := func() *v1beta2.Manifest {
		m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{
			Generation: 3, Labels: map[string]string{v1beta2.KymaNameLabel: "k1"}, Annotations: map[string]string{"a": "1"},
		}}
		m.Status.Synced = []v1beta2.Resource{{GroupVersionKind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Name: "c", Namespace: "ns"}}
		return m
	}
	f, ok := drift.Of(base(), runtime, apply.Versions{"/ConfigMap/ns/c": {UID: "u", ResourceVersion: "7"}})
	if !ok {
		t.Fatal("versions of the whole inventory make a fingerprint")
	}
	if _, ok := drift.Of(base(), runtime, apply.Versions{}); ok {
		t.Fatal("versions lacking an object of the inventory make a fingerprint")
	}

	tests := []struct {
		name    string
		change  func(m *v1beta2.Manifest)
		runtime remote.Identity
		want    bool
	}{
		{"unchanged", func(*v1beta2.Manifest) {}, runtime, true},
		{"new generation (content, values, policy)", func(m *v1beta2.Manifest) { m.Generation++ }, runtime, false},
		{"a label changed", func(m *v1beta2.Manifest) { m.Labels["x"] = "y" }, runtime, false},
		{"an annotation changed", func(m *v1beta2.Manifest) { m.Annotations["a"] = "2" }, runtime, false},
		{"another inventory", func(m *v1beta2.Manifest) { m.Status.Synced = nil }, runtime, false},
		{"another runtime", func(*v1beta2.Manifest) {}, remote.Identity{SecretUID: "s2", Server: "https://r1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.change(m)
			if got := f.Describes(m, tt.runtime); got != tt.want {
				t.Fatalf("Describes = %v, want %v", got, tt.want)
			}
		})
	}

	inventory := base().Status.Synced
	if !f.Unchanged(inventory, apply.Versions{"/ConfigMap/ns/c": {UID: "u", ResourceVersion: "7"}}) {
		t.Fatal("the same versions read back are unchanged")
	}
	for name, live := range map[string]apply.Versions{
		"written":   {"/ConfigMap/ns/c": {UID: "u", ResourceVersion: "8"}},
		"recreated": {"/ConfigMap/ns/c": {UID: "u2", ResourceVersion: "7"}},
		"missing":   {},
	} {
		if f.Unchanged(inventory, live) {
			t.Fatalf("%s: Unchanged = true", name)
		}
	}
}

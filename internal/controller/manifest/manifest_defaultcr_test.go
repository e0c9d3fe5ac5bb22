package manifest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func sampleResource(version, kind, name string) v1beta2.Resource {
	return v1beta2.Resource{
		GroupVersionKind: metav1.GroupVersionKind{Group: "operator.kyma-project.io", Version: version, Kind: kind},
		Namespace:        "kyma-system", Name: name,
	}
}

func TestWithResource(t *testing.T) {
	first := sampleResource("v1alpha1", "Sample", "first")
	second := sampleResource("v1alpha1", "Sample", "second")
	firstAtV1 := sampleResource("v1", "Sample", "first")
	firstOtherKind := sampleResource("v1alpha1", "Other", "first")
	tests := []struct {
		name     string
		recorded []v1beta2.Resource
		add      v1beta2.Resource
		want     []v1beta2.Resource
	}{
		{"first record", nil, first, []v1beta2.Resource{first}},
		{"recorded already: unchanged", []v1beta2.Resource{first}, first, []v1beta2.Resource{first}},
		{"a renamed one is added, the earlier one kept", []v1beta2.Resource{first}, second, []v1beta2.Resource{first, second}},
		{"the same object at another version replaces its record", []v1beta2.Resource{first, second}, firstAtV1, []v1beta2.Resource{firstAtV1, second}},
		{"another kind of the same name is another object", []v1beta2.Resource{first}, firstOtherKind, []v1beta2.Resource{first, firstOtherKind}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]v1beta2.Resource(nil), tt.recorded...)
			got := withResource(tt.recorded, tt.add)
			if !equalResources(got, tt.want) {
				t.Errorf("withResource(%v, %v) = %v, want %v", tt.recorded, tt.add, got, tt.want)
			}
			if !equalResources(tt.recorded, before) {
				t.Errorf("withResource changed the record it was given: %v, was %v", tt.recorded, before)
			}
		})
	}
}

func TestWithoutResource(t *testing.T) {
	first := sampleResource("v1alpha1", "Sample", "first")
	second := sampleResource("v1alpha1", "Sample", "second")
	tests := []struct {
		name     string
		recorded []v1beta2.Resource
		drop     v1beta2.Resource
		want     []v1beta2.Resource
	}{
		{"empty", nil, first, nil},
		{"not recorded: unchanged", []v1beta2.Resource{second}, first, []v1beta2.Resource{second}},
		{"dropped", []v1beta2.Resource{first, second}, first, []v1beta2.Resource{second}},
		{"dropped whatever the version", []v1beta2.Resource{first}, sampleResource("v1", "Sample", "first"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withoutResource(tt.recorded, tt.drop)
			if !equalResources(got, tt.want) {
				t.Errorf("withoutResource(%v, %v) = %v, want %v", tt.recorded, tt.drop, got, tt.want)
			}
			if len(tt.want) == 0 && got != nil {
				t.Errorf("an empty record must be nil, so that the field is omitted; got %#v", got)
			}
		})
	}
}

func TestEarlierDefaults(t *testing.T) {
	first := sampleResource("v1alpha1", "Sample", "first")
	second := sampleResource("v1alpha1", "Sample", "second")
	firstAtV1 := sampleResource("v1", "Sample", "first")
	tests := []struct {
		name     string
		recorded []v1beta2.Resource
		current  *v1beta2.Resource
		want     []v1beta2.Resource
	}{
		{"nothing recorded", nil, &first, nil},
		{"only the current one", []v1beta2.Resource{first}, &first, nil},
		{"the current one read at a new version is not an earlier one", []v1beta2.Resource{first}, &firstAtV1, nil},
		{"renamed", []v1beta2.Resource{first, second}, &second, []v1beta2.Resource{first}},
		{"no current one (Ignore, or the version names none): all are earlier", []v1beta2.Resource{first, second}, nil, []v1beta2.Resource{first, second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := earlierDefaults(tt.recorded, tt.current); !equalResources(got, tt.want) {
				t.Errorf("earlierDefaults(%v, %v) = %v, want %v", tt.recorded, tt.current, got, tt.want)
			}
		})
	}
}

func TestResourceOfAndObjectOfAgree(t *testing.T) {
	res := sampleResource("v1alpha1", "Sample", "first")
	obj := objectOf(res)
	if got := resourceOf(obj); got != res {
		t.Errorf("resourceOf(objectOf(%v)) = %v", res, got)
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("example.io/v1")
	cluster.SetKind("Cluster")
	cluster.SetName("c")
	if got := resourceOf(cluster); got.Namespace != "" || got.Group != "example.io" || got.Version != "v1" {
		t.Errorf("resourceOf of a cluster-scoped object = %v", got)
	}
}

func TestGrantedResources(t *testing.T) {
	synced := []v1beta2.Resource{sampleResource("v1", "ConfigMap", "a")}
	manifest := &v1beta2.Manifest{Status: v1beta2.ManifestStatus{Synced: synced}}
	if got := grantedResources(manifest); !equalResources(got, synced) {
		t.Errorf("without a record: %v, want the inventory %v", got, synced)
	}
	first := sampleResource("v1alpha1", "Sample", "first")
	manifest.Status.Synced = make([]v1beta2.Resource, 1, 4)
	manifest.Status.Synced[0] = synced[0]
	manifest.Status.DefaultResources = []v1beta2.Resource{first}
	got := grantedResources(manifest)
	if !equalResources(got, []v1beta2.Resource{synced[0], first}) {
		t.Errorf("with a record: %v", got)
	}
	if extra := manifest.Status.Synced[:2]; extra[1] == first {
		t.Errorf("grantedResources wrote into the inventory's spare capacity")
	}
}

func equalResources(a, b []v1beta2.Resource) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

package manifest

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

func TestDefaultRecordChanged(t *testing.T) {
	first := sampleResource("v1alpha1", "Sample", "first")
	cr := objectOf(first)
	modules := map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: "kyma", v1beta2.ModuleNameLabel: "sample",
	}
	othersModule := map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: "kyma", v1beta2.ModuleNameLabel: "other",
	}
	tests := []struct {
		name     string
		recorded []v1beta2.Resource
		cr       *unstructured.Unstructured
		read     bool
		labels   map[string]string
		want     bool
	}{
		{"the module's and recorded", []v1beta2.Resource{first}, cr, true, modules, false},
		{"the owner's and not recorded", nil, cr, true, map[string]string{"team": "a"}, false},
		{"taken over: labels removed from a recorded one", []v1beta2.Resource{first}, cr, true, nil, true},
		{"labelled for another module", []v1beta2.Resource{first}, cr, true, othersModule, true},
		{"the module's, not recorded yet (a Manifest from before the record)", nil, cr, true, modules, true},
		{"recorded at another version", []v1beta2.Resource{sampleResource("v1", "Sample", "first")}, cr, true, modules, false},
		{"not read (the manager is not ready, or it is missing): no answer", []v1beta2.Resource{first}, cr, false, nil, false},
		{"no default custom resource (Ignore)", []v1beta2.Resource{first}, nil, false, nil, false},
	}
	r := &Reconciler{SyncNamespace: "kyma-system"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifest := &v1beta2.Manifest{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1beta2.KymaNameLabel: "kyma"}},
				Spec:       v1beta2.ManifestSpec{ModuleName: "sample"},
				Status:     v1beta2.ManifestStatus{DefaultResources: tt.recorded},
			}
			read := &defaultReader{read: tt.read, labels: tt.labels}
			if got := r.defaultRecordChanged(manifest, tt.cr, read); got != tt.want {
				t.Errorf("defaultRecordChanged = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestServedVersion(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{
		{Group: "operator.kyma-project.io", Version: "v1beta1"}, {Group: "operator.kyma-project.io", Version: "v1alpha2"},
	})
	// The CRD serves Sample at v1beta1 (preferred) and v1alpha2; v1alpha1
	// was dropped.
	mapper.Add(schema.GroupVersionKind{Group: "operator.kyma-project.io", Version: "v1beta1", Kind: "Sample"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "operator.kyma-project.io", Version: "v1alpha2", Kind: "Sample"}, meta.RESTScopeNamespace)
	tests := []struct {
		name    string
		res     v1beta2.Resource
		want    v1beta2.Resource
		wantOK  bool
		wantErr bool
	}{
		{"served at its version", sampleResource("v1alpha2", "Sample", "first"), sampleResource("v1alpha2", "Sample", "first"), true, false},
		{"its version was dropped: the preferred one", sampleResource("v1alpha1", "Sample", "first"), sampleResource("v1beta1", "Sample", "first"), true, false},
		{"its kind is not served at all", sampleResource("v1alpha1", "Gone", "first"), sampleResource("v1alpha1", "Gone", "first"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := servedVersion(mapper, tt.res)
			if (err != nil) != tt.wantErr || ok != tt.wantOK || got != tt.want {
				t.Errorf("servedVersion(%v) = %v, %v, %v; want %v, %v", tt.res, got, ok, err, tt.want, tt.wantOK)
			}
		})
	}
}

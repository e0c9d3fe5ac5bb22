package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: "operator.kyma-project.io", Version: "v1beta2"}

var (
	// SchemeBuilder collects the kinds of this package for a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme registers every kind of this package in a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&Kyma{}, &KymaList{},
		&ModuleTemplate{}, &ModuleTemplateList{},
		&ModuleReleaseMeta{}, &ModuleReleaseMetaList{},
		&Manifest{}, &ManifestList{},
		&Watcher{}, &WatcherList{},
		&ModuleRollout{}, &ModuleRolloutList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

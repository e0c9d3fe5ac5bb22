package transform

import (
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Options say whose objects they are and where they go.
type Options struct {
	// KymaName and ModuleName end up in the ownership labels.
	KymaName   string
	ModuleName string
	// Manifest is the Manifest the objects are rendered from.
	Manifest types.NamespacedName
	// Debug turns the module's debug mode on (debug label) or off (no
	// debug label, even when the rendered content had one).
	Debug bool
	// DefaultNamespace is where namespaced objects that name no namespace
	// go: the runtime's sync namespace, kyma-system when empty.
	DefaultNamespace string
	// Scope says whether a kind the batch does not define is namespaced;
	// RESTMapperScope of the runtime's RESTMapper is the usual choice.
	Scope ScopeFunc
	// LocalizedImages replace the images of the same name (images.go).
	LocalizedImages []string
}

// Objects changes rendered objects in place before they are applied. It
// fails, having changed nothing, when an object's kind is unknown.
func Objects(objs []*unstructured.Unstructured, opts Options) error {
	if opts.KymaName == "" || opts.ModuleName == "" || opts.Manifest.Name == "" {
		return errors.New("transforming objects needs the Kyma name, the module name and the Manifest")
	}
	if opts.Scope == nil {
		return errors.New("transforming objects needs a Scope to tell namespaced kinds")
	}
	namespaced, err := scopes(objs, opts.Scope)
	if err != nil {
		return err
	}
	defaultNamespace := opts.DefaultNamespace
	if defaultNamespace == "" {
		defaultNamespace = v1beta2.DefaultRuntimeNamespace
	}
	localizer, err := NewLocalizer(opts.LocalizedImages)
	if err != nil {
		return err
	}
	for i, obj := range objs {
		localizer.localize(obj)
		setNamespace(obj, namespaced[i], defaultNamespace)
		markOwnership(obj, opts)
		setDebug(obj, opts.Debug)
	}
	return nil
}

// setNamespace gives a namespaced object the default namespace when it
// names none, and takes the namespace off a cluster-scoped one, so that the
// inventory names each object exactly as the API server does.
func setNamespace(obj *unstructured.Unstructured, namespaced bool, defaultNamespace string) {
	switch {
	case !namespaced:
		obj.SetNamespace("")
	case obj.GetNamespace() == "":
		obj.SetNamespace(defaultNamespace)
	}
}

// markOwnership puts on the labels that pruning relies on and the annotation
// that leads back to the Manifest.
func markOwnership(obj *unstructured.Unstructured, opts Options) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1beta2.ManagedByLabel] = v1beta2.ManagedByValue
	labels[v1beta2.KymaNameLabel] = opts.KymaName
	labels[v1beta2.ModuleNameLabel] = opts.ModuleName
	obj.SetLabels(labels)

	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1beta2.OwnedByAnnotation] = opts.Manifest.Namespace + "/" + opts.Manifest.Name
	// Whether an object was adopted is decided in the runtime, not claimed
	// by content: a module that could set it could keep its objects from
	// ever being deleted, or mark an object as adopted that it created.
	delete(annotations, v1beta2.AdoptedAnnotation)
	obj.SetAnnotations(annotations)
}

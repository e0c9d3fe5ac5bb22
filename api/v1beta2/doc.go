// Package v1beta2 holds the operator.kyma-project.io/v1beta2 API: Kyma,
// ModuleTemplate, ModuleReleaseMeta, Manifest and Watcher.
//
// Field names follow the Kyma lifecycle-manager API of the same group and
// version, so a resource written for that API applies unchanged and means the
// same. Fields this project adds are optional; fields of that API this project
// does not act on are accepted and documented as ignored.
//
// +kubebuilder:object:generate=true
// +groupName=operator.kyma-project.io
package v1beta2

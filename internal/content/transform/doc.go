// Package transform prepares rendered module objects for applying to a
// runtime: it marks them as managed by this operator and owned by their
// Manifest (only objects so marked are ever pruned), turns a module's debug
// mode on or off, and places namespaced objects that name no namespace in the
// runtime's sync namespace, as module manifests assume.
package transform

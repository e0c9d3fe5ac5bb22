package access

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// writeVerbs are what applying, pruning and removing a module's objects
// take. Creating counts: a server-side apply that creates an object is
// authorized as create of that name, so that resourceNames hold for it too.
var writeVerbs = []string{"get", "create", "update", "patch", "delete"}

// Grant is everything a module's identity holds in a runtime.
type Grant struct {
	// Declared is what the module's template declares.
	Declared v1beta2.ModuleRBAC
	// Cluster are the writes of the content's cluster-scoped objects, by
	// name.
	Cluster []rbacv1.PolicyRule
	// Namespaced are, per namespace, the writes of the content's objects
	// in it, by name.
	Namespaced map[string][]rbacv1.PolicyRule
}

// Writes lists the resources (plural.group) the grant lets the identity
// write objects of, for status.
func (g Grant) Writes() []string {
	seen := map[string]bool{}
	add := func(rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					seen[qualified(resource, group)] = true
				}
			}
		}
	}
	add(g.Cluster)
	for _, rules := range g.Namespaced {
		add(rules)
	}
	writes := make([]string, 0, len(seen))
	for w := range seen {
		writes = append(writes, w)
	}
	slices.Sort(writes)
	return writes
}

// Hash identifies the grant: an identity ensured for the same hash needs
// no writes.
func (g Grant) Hash() string {
	b, err := json.Marshal(g) // maps marshal in key order
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func qualified(resource, group string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

// target is one object the identity writes.
type target struct {
	namespace, group, resource, name string
}

// Derive is the grant of a module whose content is objects: the declared
// rules, and the writes of every object in objects and in inventory (what
// was applied before and may have to be pruned), by name.
//
// objects must be only what the module may write (apply.Plan.Writable):
// rights come from what the module provably owns, decided before the grant
// is written, never from what its content names. Namespaced objects are
// granted only in own, the module's own namespaces (apply.Plan.OwnNamespaces:
// the sync namespace and the Namespaces the module created). An object in
// any other namespace gets no grant, so that the runtime's API server
// refuses it too.
//
// A kind's resource comes from the CRDs among objects when the module
// defines it, else from the runtime's REST mapper; an inventory kind the
// runtime no longer serves needs no grant: its objects are gone with their
// CRD.
//
// created is the module's default custom resource, if any: it is created
// with a plain create when absent, which names no object, so its resource
// is granted create without names (in its namespace), besides the writes
// of it by name. A create cannot change an object that exists.
func Derive(declared v1beta2.ModuleRBAC, own []string, objects []*unstructured.Unstructured, created *unstructured.Unstructured, inventory []v1beta2.Resource, mapper meta.RESTMapper) (Grant, error) {
	defined, err := definedResources(objects)
	if err != nil {
		return Grant{}, err
	}
	resourceOf := func(gvk schema.GroupVersionKind) (string, error) {
		if r, ok := defined[gvk.GroupKind()]; ok {
			return r, nil
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return "", err
		}
		return mapping.Resource.Resource, nil
	}
	if created != nil {
		objects = append(objects[:len(objects):len(objects)], created)
	}
	var targets []target
	for _, obj := range objects {
		gvk := obj.GroupVersionKind()
		resource, err := resourceOf(gvk)
		if err != nil {
			return Grant{}, fmt.Errorf("%s %q: kind %s: %w", obj.GetKind(), obj.GetName(), gvk, err)
		}
		targets = append(targets, target{obj.GetNamespace(), gvk.Group, resource, obj.GetName()})
	}
	for _, r := range inventory {
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		resource, err := resourceOf(gvk)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return Grant{}, fmt.Errorf("%s %q: kind %s: %w", r.Kind, r.Name, gvk, err)
		}
		targets = append(targets, target{r.Namespace, r.Group, resource, r.Name})
	}
	grant := Grant{Declared: declared, Namespaced: map[string][]rbacv1.PolicyRule{}}
	byNamespace := map[string][]target{}
	for _, t := range targets {
		if t.namespace == "" && t.group == "" && t.resource == "namespaces" && !slices.Contains(own, t.name) {
			continue // a Namespace the module did not create: never written
		}
		if t.namespace == "" || slices.Contains(own, t.namespace) {
			byNamespace[t.namespace] = append(byNamespace[t.namespace], t)
		}
	}
	for namespace, ts := range byNamespace {
		rules := rulesFor(ts)
		if created != nil && created.GetNamespace() == namespace {
			resource, _ := resourceOf(created.GroupVersionKind()) // found above
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{created.GroupVersionKind().Group}, Resources: []string{resource}, Verbs: []string{"create"}})
		}
		if namespace == "" {
			grant.Cluster = rules
		} else {
			grant.Namespaced[namespace] = rules
		}
	}
	return grant, nil
}

// rulesFor makes one rule per resource, naming its objects.
func rulesFor(targets []target) []rbacv1.PolicyRule {
	names := map[[2]string][]string{}
	for _, t := range targets {
		k := [2]string{t.group, t.resource}
		if !slices.Contains(names[k], t.name) {
			names[k] = append(names[k], t.name)
		}
	}
	keys := make([][2]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	rules := make([]rbacv1.PolicyRule, 0, len(keys))
	for _, k := range keys {
		n := names[k]
		slices.Sort(n)
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups: []string{k[0]}, Resources: []string{k[1]}, ResourceNames: n, Verbs: writeVerbs,
		})
	}
	return rules
}

// definedResources maps each kind that a CRD among objects defines to its
// resource: the runtime cannot serve it before the CRD is applied.
func definedResources(objects []*unstructured.Unstructured) (map[schema.GroupKind]string, error) {
	defined := map[schema.GroupKind]string{}
	for _, obj := range objects {
		gvk := obj.GroupVersionKind()
		if gvk.Group != "apiextensions.k8s.io" || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		group, _, err := unstructured.NestedString(obj.Object, "spec", "group")
		if err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %q: spec.group: %w", obj.GetName(), err)
		}
		kind, _, err := unstructured.NestedString(obj.Object, "spec", "names", "kind")
		if err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %q: spec.names.kind: %w", obj.GetName(), err)
		}
		plural, _, err := unstructured.NestedString(obj.Object, "spec", "names", "plural")
		if err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %q: spec.names.plural: %w", obj.GetName(), err)
		}
		defined[schema.GroupKind{Group: group, Kind: kind}] = plural
	}
	return defined, nil
}

package access

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager writes module identities, apart from the module content's
// field manager.
const FieldManager = "lifecycle-manager-access"

// Ensure writes the identity and its grant into the runtime through admin,
// the runtime's admin client, and returns once the runtime's API server
// authorizes what it granted (WaitEffective). Namespaced writes for a namespace that does
// not exist yet (one the module's content creates) cannot be granted
// before it does; those namespaces are returned, and Ensure is called again
// once the content's Namespaces are applied.
func Ensure(ctx context.Context, admin client.Client, id Identity, grant Grant) (pending []string, err error) {
	namespace := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountNamespace, Labels: labels()},
	}
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: id.ServiceAccount(), Namespace: ServiceAccountNamespace, Labels: labels()},
		// Its tokens come from TokenRequest only, never a Secret.
		AutomountServiceAccountToken: new(false),
	}
	objects := []client.Object{namespace, sa}
	objects = append(objects, clusterGrant(id, purposeDeclared, grant.Declared.ClusterRules)...)
	objects = append(objects, clusterGrant(id, purposeWrites, grant.Cluster)...)
	objects = append(objects, namespacedGrant(id, purposeDeclared, id.Namespace, grant.Declared.NamespacedRules)...)
	for _, obj := range objects {
		if err := applyObject(ctx, admin, obj); err != nil {
			return nil, err
		}
	}
	var written []string
	for _, namespace := range sortedKeys(grant.Namespaced) {
		err := applyAll(ctx, admin, namespacedGrant(id, purposeWrites, namespace, grant.Namespaced[namespace]))
		if apierrors.IsNotFound(err) {
			pending = append(pending, namespace)
			continue
		}
		if err != nil {
			return nil, err
		}
		written = append(written, namespace)
	}
	if err := removeStaleWrites(ctx, admin, id, grant); err != nil {
		return nil, err
	}
	if err := removeLegacyServiceAccount(ctx, admin, id); err != nil {
		return nil, err
	}
	return pending, WaitEffective(ctx, admin, id, grant, written)
}

// removeStaleWrites deletes the identity's writes Roles (and bindings) in
// namespaces the grant no longer covers: a namespace the module left, or
// one an earlier version of the operator granted from what the content
// named rather than what the module owns. A grant only narrows so.
func removeStaleWrites(ctx context.Context, admin client.Client, id Identity, grant Grant) error {
	roles := &rbacv1.RoleList{}
	if err := admin.List(ctx, roles, client.MatchingLabels{identityLabel: "true"}); err != nil {
		return fmt.Errorf("listing the module identity's Roles: %w", err)
	}
	name := id.roleName(purposeWrites)
	for i := range roles.Items {
		role := &roles.Items[i]
		if _, granted := grant.Namespaced[role.Namespace]; role.Name != name || granted {
			continue
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: role.Namespace}}
		for _, obj := range []client.Object{binding, role} {
			if err := admin.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting the module identity's writes in namespace %s: %w", role.Namespace, err)
			}
		}
	}
	return nil
}

// removeLegacyServiceAccount deletes the identity's ServiceAccount of
// before ServiceAccountNamespace, from the sync namespace: a Pod there
// could run as it. Only one that carries the identity's label is deleted.
func removeLegacyServiceAccount(ctx context.Context, admin client.Client, id Identity) error {
	namespace, name := id.legacyServiceAccount()
	sa := &corev1.ServiceAccount{}
	err := admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sa)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the module identity's former ServiceAccount %s/%s: %w", namespace, name, err)
	}
	if sa.Labels[identityLabel] != "true" {
		return nil // not ours
	}
	if err := admin.Delete(ctx, sa, client.Preconditions{UID: &sa.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the module identity's former ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Remove deletes the identity from the runtime: its bindings first, so
// that nothing is left able to act, then its roles and ServiceAccount.
// Tokens issued for the ServiceAccount stop working with it: the API
// server checks that a token's ServiceAccount still exists.
func Remove(ctx context.Context, admin client.Client, id Identity) error {
	roles := &rbacv1.RoleList{}
	if err := admin.List(ctx, roles, client.MatchingLabels{identityLabel: "true"}); err != nil {
		return fmt.Errorf("listing the module identity's Roles: %w", err)
	}
	var objects []client.Object
	for _, purpose := range []string{purposeDeclared, purposeWrites} {
		name := id.roleName(purpose)
		objects = append(objects,
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		for i := range roles.Items {
			if roles.Items[i].Name == name {
				objects = append(objects,
					&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: roles.Items[i].Namespace}},
					&roles.Items[i])
			}
		}
	}
	objects = append(objects, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: id.ServiceAccount(), Namespace: ServiceAccountNamespace}})
	var errs []error
	if err := removeLegacyServiceAccount(ctx, admin, id); err != nil {
		errs = append(errs, err)
	}
	for _, obj := range objects {
		if err := admin.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err))
		}
	}
	return errors.Join(errs...)
}

func clusterGrant(id Identity, purpose string, rules []rbacv1.PolicyRule) []client.Object {
	name := id.roleName(purpose)
	return []client.Object{
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels()},
			Rules:      nonNil(rules),
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels()},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{subject(id)},
		},
	}
}

func namespacedGrant(id Identity, purpose, namespace string, rules []rbacv1.PolicyRule) []client.Object {
	name := id.roleName(purpose)
	return []client.Object{
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels()},
			Rules:      nonNil(rules),
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels()},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{subject(id)},
		},
	}
}

func subject(id Identity) rbacv1.Subject {
	return rbacv1.Subject{Kind: "ServiceAccount", Name: id.ServiceAccount(), Namespace: ServiceAccountNamespace}
}

// nonNil makes an empty rule list explicit, so that an apply removes rules
// a previous version granted.
func nonNil(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	if rules == nil {
		return []rbacv1.PolicyRule{}
	}
	return rules
}

func applyAll(ctx context.Context, c client.Client, objects []client.Object) error {
	for _, obj := range objects {
		if err := applyObject(ctx, c, obj); err != nil {
			return err
		}
	}
	return nil
}

func applyObject(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("encoding %T %s: %w", obj, obj.GetName(), err)
	}
	delete(u["metadata"].(map[string]any), "creationTimestamp")
	applied := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := c.Apply(ctx, applied, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the module identity's %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package access

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// effectiveTimeout bounds the wait for a written grant to take effect.
const effectiveTimeout = 10 * time.Second

// WaitEffective waits until the runtime's API server authorizes the
// identity for what the grant says. Its RBAC authorizer reads roles and
// bindings from a cache of its own, so a grant written a moment ago may
// not hold yet: the module's first write would be refused, and shown as an
// AccessRefused that fixes itself. One rule of each role is asked about
// (SubjectAccessReview), the last of them written.
func WaitEffective(ctx context.Context, admin client.Client, id Identity, grant Grant, namespaces []string) error {
	var checks []authorizationv1.ResourceAttributes
	add := func(namespace string, rules []rbacv1.PolicyRule) {
		if len(rules) == 0 || len(rules[0].Verbs) == 0 || len(rules[0].Resources) == 0 || len(rules[0].APIGroups) == 0 {
			return
		}
		r := rules[len(rules)-1]
		check := authorizationv1.ResourceAttributes{Namespace: namespace, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
		if len(r.ResourceNames) > 0 {
			check.Name = r.ResourceNames[0]
		}
		checks = append(checks, check)
	}
	add("", grant.Declared.ClusterRules)
	add(id.Namespace, grant.Declared.NamespacedRules)
	add("", grant.Cluster)
	for _, namespace := range namespaces {
		add(namespace, grant.Namespaced[namespace])
	}
	for _, check := range checks {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, effectiveTimeout, true, func(ctx context.Context) (bool, error) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               id.Username(),
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ServiceAccountNamespace, "system:authenticated"},
				ResourceAttributes: &check,
			}}
			if err := admin.Create(ctx, review); err != nil {
				return false, err
			}
			return review.Status.Allowed, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the module identity's rights to take effect (%s %s/%s %s): %w", check.Verb, check.Group, check.Resource, check.Name, err)
		}
	}
	return nil
}

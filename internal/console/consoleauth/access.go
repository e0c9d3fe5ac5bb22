package consoleauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/console"
)

// Defaults of SubjectAccess.
const (
	DefaultAccessTTL        = 30 * time.Second
	DefaultAccessMaxEntries = 10000
)

// SubjectAccess answers console.Access with a SubjectAccessReview for the
// viewer: the API server's own authorizer decides, so what a viewer sees in
// the console is what their RBAC (or any other authorizer) lets them list.
// The console's own ServiceAccount reads everything it serves; this is what
// keeps one viewer from seeing more than they could with kubectl.
//
// Answers, allowed or not, are cached per viewer, resource and namespace for
// TTL, at most MaxEntries of them: a revoked right is honoured within TTL.
// Errors are not cached.
type SubjectAccess struct {
	reviews authorizationv1client.SubjectAccessReviewInterface
	cache   *ttlCache[bool]
}

var _ console.Access = (*SubjectAccess)(nil)

// NewSubjectAccess returns a SubjectAccess that creates its reviews with
// reviews (the console's ServiceAccount needs create on
// subjectaccessreviews), its answers cached as cache says.
func NewSubjectAccess(reviews authorizationv1client.SubjectAccessReviewInterface, cache CacheOptions) *SubjectAccess {
	return &SubjectAccess{reviews: reviews, cache: newCache[bool](cache, DefaultAccessTTL, DefaultAccessMaxEntries)}
}

// CanList implements console.Access: may v list resource (of the operator's
// API group) in namespace.
func (a *SubjectAccess) CanList(ctx context.Context, v console.Viewer, resource, namespace string) (bool, error) {
	if v.Name == "" {
		return false, errors.New("asking access for a viewer without a name")
	}
	key := accessKey(v, resource, namespace)
	if allowed, ok := a.cache.get(key); ok {
		return allowed, nil
	}
	review, err := a.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   v.Name,
			Groups: v.Groups,
			Extra:  extraOf(v.Extra),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "list", Group: v1beta2.GroupVersion.Group, Resource: resource,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking the API server whether %s may list %s in %s: %w", v.Name, resource, namespace, err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	a.cache.put(key, allowed)
	return allowed, nil
}

func extraOf(extra map[string][]string) map[string]authorizationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// accessKey identifies a question: the whole identity (name, groups, extra;
// two viewers of one name but other groups may have other rights), the
// resource and the namespace, hashed so that keys stay small.
func accessKey(v console.Viewer, resource, namespace string) string {
	h := sha256.New()
	write := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	write(v.Name)
	groups := slices.Clone(v.Groups)
	slices.Sort(groups)
	write(strings.Join(groups, "\x01"))
	keys := make([]string, 0, len(v.Extra))
	for k := range v.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write(k)
		write(strings.Join(v.Extra[k], "\x01"))
	}
	write(resource)
	write(namespace)
	return hex.EncodeToString(h.Sum(nil))
}

package testenv

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
)

// right is what one request to the API server used: a verb on a resource
// (with its subresource, e.g. "kymas/status") of a group, in a namespace
// ("" for cluster-scoped ones).
type right struct {
	group, resource, verb, namespace string
}

func (r right) String() string {
	where := "cluster-wide"
	if r.namespace != "" {
		where = "in " + r.namespace
	}
	group := r.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s.%s %s", r.verb, r.resource, group, where)
}

// requestLog records the operator's requests to the control plane: each
// right used, and each request the API server refused as forbidden, which
// the operator may have retried or only logged, so that Main can fail the
// package for it.
type requestLog struct {
	mu      sync.Mutex
	used    map[right]bool
	refused map[right]int
}

func newRequestLog() *requestLog {
	return &requestLog{used: map[right]bool{}, refused: map[right]int{}}
}

// wrap is a rest.Config WrapTransport.
func (l *requestLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		r, ok := rightOf(req)
		resp, err := next.RoundTrip(req)
		if ok {
			l.mu.Lock()
			l.used[r] = true
			if err == nil && resp.StatusCode == http.StatusForbidden {
				l.refused[r]++
			}
			l.mu.Unlock()
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// rightOf reads the right a request uses from its method and path, the way
// the API server's authorizer sees it; discovery and other non-resource
// paths use none.
func rightOf(req *http.Request) (right, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var r right
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		r.group = parts[1]
		parts = parts[3:]
	default:
		return right{}, false
	}
	// namespaces/NS/RESOURCE/... is namespaced; namespaces[/NAME] is the
	// Namespace resource itself.
	if len(parts) >= 3 && parts[0] == "namespaces" {
		r.namespace = parts[1]
		parts = parts[2:]
	}
	r.resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		r.resource += "/" + parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case named:
			r.verb = "get"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			r.verb = "watch"
		default:
			r.verb = "list"
		}
	case http.MethodPost:
		r.verb = "create"
	case http.MethodPut:
		r.verb = "update"
	case http.MethodPatch:
		r.verb = "patch"
	case http.MethodDelete:
		r.verb = "delete"
		if !named {
			r.verb = "deletecollection"
		}
	default:
		return right{}, false
	}
	return r, true
}

// report writes the refused requests and the granted rights that no request
// used to w, and tells whether any request was refused.
func (l *requestLog) report(w io.Writer, pkg string, roles []namespacedRules) (refused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range sortedRights(l.refused) {
		fmt.Fprintf(w, "%s: the operator was refused %d request(s): %s; config/rbac (internal/operator/rbac.go) lacks the right\n", pkg, l.refused[r], r)
	}
	var unused []string
	for _, role := range roles {
		for _, rule := range role.rules {
			for _, granted := range expand(rule, role.namespace) {
				if !l.used[granted] {
					unused = append(unused, granted.String())
				}
			}
		}
	}
	if len(unused) > 0 {
		fmt.Fprintf(w, "%s: rights the operator holds and no request used: %s\n", pkg, strings.Join(unused, "; "))
	}
	return len(l.refused) > 0
}

// namespacedRules are the rules of a Role (namespace set) or ClusterRole.
type namespacedRules struct {
	namespace string
	rules     []rbacv1.PolicyRule
}

func expand(rule rbacv1.PolicyRule, namespace string) []right {
	var out []right
	for _, group := range rule.APIGroups {
		for _, resource := range rule.Resources {
			for _, verb := range rule.Verbs {
				out = append(out, right{group: group, resource: resource, verb: verb, namespace: namespace})
			}
		}
	}
	return out
}

func sortedRights[V any](m map[right]V) []right {
	keys := make([]right, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b right) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

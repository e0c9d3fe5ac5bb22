// Package access gives each module an identity of its own in a runtime
// (SPEC R10): a ServiceAccount bound to exactly the RBAC that its
// ModuleTemplate declares, plus the right to write the objects of its own
// content, by name. The module's content is then applied as that identity,
// through the runtime's admin connection with impersonation, so that the
// runtime's API server — not this operator — refuses what the module may
// not do: RBAC in its content that grants more than was declared
// (escalation), objects that are not in its content.
//
// Only the identity itself (ServiceAccount, Roles, ClusterRoles and their
// bindings) is written with the admin credential; the admin credential
// never leaves the control plane. A module whose operator runs in the
// control plane gets a kubeconfig with a short-lived token of its identity
// instead (token.go).
package access

import (
	"fmt"
	"strings"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Identity is one module's identity in one runtime. Kymas that share a
// runtime API server have sync namespaces of their own, so the sync
// namespace is part of every name.
type Identity struct {
	Kyma   string
	Module string
	// Namespace is the sync namespace: where the declared namespaced rules
	// are granted. The ServiceAccount is in ServiceAccountNamespace.
	Namespace string
}

// ServiceAccountNamespace holds the ServiceAccounts of all module
// identities of a runtime. No module's content may write into it
// (apply.Limits), and a Pod can run only as a ServiceAccount of its own
// namespace: so no module's Pod can run as another module's identity,
// whatever its spec says. In the sync namespace, where modules do write,
// any Pod could.
const ServiceAccountNamespace = "lifecycle-manager-identities"

// ServiceAccount is the name of the identity's ServiceAccount: the module
// and the sync namespace, as modules of Kymas that share an API server
// share ServiceAccountNamespace.
func (i Identity) ServiceAccount() string { return i.Module + "." + i.Namespace }

// legacyServiceAccount is where the identity's ServiceAccount was, in the
// sync namespace, before ServiceAccountNamespace: removed when found.
func (i Identity) legacyServiceAccount() (namespace, name string) {
	return i.Namespace, "lm-module-" + i.Module
}

// IsIdentityServiceAccount tells whether a ServiceAccount name is, or
// looks like, one of a module identity of the sync namespace: the name
// identities have in ServiceAccountNamespace, or the one they had in the
// sync namespace before it. A module's Pod never runs as such a name,
// wherever it is.
func IsIdentityServiceAccount(name, syncNamespace string) bool {
	return strings.HasPrefix(name, "lm-module-") || strings.HasSuffix(name, "."+syncNamespace)
}

// Username is the name the runtime's API server knows the identity by.
func (i Identity) Username() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", ServiceAccountNamespace, i.ServiceAccount())
}

// String is namespace/name of the ServiceAccount, as status shows it.
func (i Identity) String() string { return ServiceAccountNamespace + "/" + i.ServiceAccount() }

// roleName names the identity's ClusterRoles, Roles and bindings; purpose
// is "declared" (the template's rules) or "writes" (its content's
// objects).
func (i Identity) roleName(purpose string) string {
	return fmt.Sprintf("lifecycle-manager:module:%s:%s:%s", i.Namespace, i.Module, purpose)
}

// labels mark every object of the identity. They are not the module's
// labels (Kyma, module): the identity is not part of the module's content,
// and the ownership guard, drift checks and the watcher must never take it
// for that.
func labels() map[string]string {
	return map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue,
		identityLabel:          "true",
	}
}

// identityLabel marks the objects of module identities, so that removing
// one finds its Roles in whatever namespaces they are.
const identityLabel = "operator.kyma-project.io/module-identity"

// Names of the purposes of the identity's roles.
const (
	purposeDeclared = "declared"
	purposeWrites   = "writes"
)

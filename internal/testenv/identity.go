package testenv

import (
	"context"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// serviceAccount is the operator's ServiceAccount in the chart and config/.
const serviceAccount = "lifecycle-manager"

// operatorIdentity gives the operator under test exactly the rights an
// installation gives it: it applies the chart's ServiceAccount, Roles,
// ClusterRole and bindings, rendered for the package's namespaces, and
// returns a config of the control plane that authenticates as that
// ServiceAccount with a token from the TokenRequest API. So a right the
// operator needs and config/rbac lacks fails the tests that need it.
// It returns the rules granted too, for requestLog.report.
func operatorIdentity(ctx context.Context, admin client.Client, kcp *rest.Config, namespace, pkiNamespace string) (*rest.Config, []namespacedRules, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	rendered, err := install.RenderChart(filepath.Join(root, "charts", "lifecycle-manager"), namespace, map[string]any{"pkiNamespace": pkiNamespace})
	if err != nil {
		return nil, nil, err
	}
	var namespaces, others []*unstructured.Unstructured
	var granted []namespacedRules
	for _, obj := range rendered.Objects() {
		switch kind := obj.GetKind(); {
		case kind == "Namespace":
			namespaces = append(namespaces, obj)
		case identityKinds[kind]:
			others = append(others, obj)
			if kind == "Role" || kind == "ClusterRole" {
				role := &rbacv1.Role{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role); err != nil {
					return nil, nil, fmt.Errorf("%s %s: %w", kind, obj.GetName(), err)
				}
				granted = append(granted, namespacedRules{namespace: obj.GetNamespace(), rules: role.Rules})
			}
		}
	}
	for _, obj := range append(namespaces, others...) {
		if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("creating %s %s from the chart: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	clientset, err := kubernetes.NewForConfig(kcp)
	if err != nil {
		return nil, nil, err
	}
	token, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, serviceAccount, err)
	}
	cfg := rest.AnonymousClientConfig(kcp)
	cfg.BearerToken = token.Status.Token
	return cfg, granted, nil
}

// identityKinds are the chart's objects that make the operator's identity,
// created after the chart's Namespaces (the PKI namespace holds a Role).
var identityKinds = map[string]bool{
	"ServiceAccount": true, "Role": true, "ClusterRole": true, "RoleBinding": true, "ClusterRoleBinding": true,
}

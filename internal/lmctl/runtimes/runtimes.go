// Package runtimes reaches a runtime from lmctl: through its Kyma's
// registration Secret in the control plane, on the operator's terms.
package runtimes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// Config is the runtime's REST config from the Kyma's kubeconfig Secret
// (label operator.kyma-project.io/kyma-name, key config; inline
// credentials only, as the operator accepts them).
func Config(ctx context.Context, kcp client.Reader, namespace, kyma string) (*rest.Config, error) {
	secrets := &corev1.SecretList{}
	if err := kcp.List(ctx, secrets, client.InNamespace(namespace), client.MatchingLabels{v1beta2.KymaNameLabel: kyma}); err != nil {
		return nil, fmt.Errorf("finding the kubeconfig Secret of Kyma %s: %w", kyma, err)
	}
	for _, s := range secrets.Items {
		if raw, ok := s.Data["config"]; ok {
			cfg, err := remote.RESTConfig(raw)
			if err != nil {
				return nil, fmt.Errorf("the kubeconfig Secret %s of Kyma %s: %w", s.Name, kyma, err)
			}
			return cfg, nil
		}
	}
	return nil, fmt.Errorf("no kubeconfig Secret of Kyma %s (label %s=%s, key config)", kyma, v1beta2.KymaNameLabel, kyma)
}

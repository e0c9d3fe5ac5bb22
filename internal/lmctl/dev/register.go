package dev

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// register registers a runtime the way a provisioner would: its kubeconfig
// in a Secret labelled with the Kyma's name, then a Kyma with the runtime's
// id and modules.
func register(ctx context.Context, c client.Client, namespace string, rt *runtimeTarget, modules []string) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      rt.Name + "-kubeconfig",
			Namespace: namespace,
			Labels:    map[string]string{v1beta2.KymaNameLabel: rt.Name},
		},
		Data: map[string][]byte{remote.KubeconfigKey: rt.kubeconfig},
	}
	if err := c.Create(ctx, secret); err != nil {
		return fmt.Errorf("registering runtime %s: creating Secret %s: %w", rt.Name, secret.Name, err)
	}
	if err := c.Create(ctx, newKyma(namespace, rt, modules)); err != nil {
		return fmt.Errorf("registering runtime %s: creating its Kyma: %w", rt.Name, err)
	}
	return nil
}

func newKyma(namespace string, rt *runtimeTarget, modules []string) *v1beta2.Kyma {
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{
			Name:      rt.Name,
			Namespace: namespace,
			Labels:    map[string]string{v1beta2.RuntimeIDLabel: rt.ID},
		},
		Spec: v1beta2.KymaSpec{Channel: v1beta2.DefaultChannel},
	}
	if rt.Attached {
		// No agent can run for it (see runtimeWatchers): reporting paused,
		// the operator puts no agent into someone's cluster and does not
		// count the runtime as silent.
		kyma.Labels[v1beta2.WatcherPausedLabel] = "true"
	}
	for _, name := range modules {
		// Managed and the policy are spelled out: a Go zero value would be
		// sent as managed: false, which leaves the module alone.
		kyma.Spec.Modules = append(kyma.Spec.Modules, v1beta2.Module{
			Name: name, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete,
		})
	}
	return kyma
}

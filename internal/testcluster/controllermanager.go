package testcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// componentAuth are the arguments of the controller manager and the scheduler: the admin
// kubeconfig for everything, and --secure-port=0 so that they need no port, certificate or
// authorization of their own.
func (c *Cluster) componentAuth() []string {
	return []string{
		"--kubeconfig=" + c.kubeconfigPath,
		"--authentication-kubeconfig=" + c.kubeconfigPath,
		"--authorization-kubeconfig=" + c.kubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
	}
}

// controllerManagerArgs are kube-controller-manager's arguments; controllers is its
// --controllers.
func (c *Cluster) controllerManagerArgs(controllers string) []string {
	return append(c.componentAuth(),
		"--controllers="+controllers,
		"--use-service-account-credentials=false",
		"--root-ca-file="+c.certs.caCertFile,
	)
}

// controllerManagerWorks passes once the controller manager created the default
// ServiceAccount: it has started its controllers (the cheapest sign it gives without a
// secure port).
func controllerManagerWorks(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no default ServiceAccount yet: %w", err)
	}
	return err
}

// WorkloadControllers are the controllers StartControllerManager runs by default: those that
// make a Deployment roll out and count as Available, and give Services their endpoints, as in
// a real cluster; the garbage collector removes a deleted Deployment's ReplicaSets and Pods.
var WorkloadControllers = []string{
	"deployment-controller", "replicaset-controller", "endpointslice-controller",
	"garbage-collector-controller",
}

// StartControllerManager runs kube-controller-manager against the control plane with the
// named controllers (kube-controller-manager's names; WorkloadControllers when none), for a
// test that needs Kubernetes' own controllers to judge what the operator's installation
// does: a Deployment's rollout and availability, a Service's endpoints. A control plane has
// no scheduler or kubelet: the test plays them (internal/testkubelet). It returns once the
// controller manager works; stop ends it, so that the package's other tests run without it.
func (c *ControlPlane) StartControllerManager(ctx context.Context, controllers ...string) (stop func() error, err error) {
	if len(controllers) == 0 {
		controllers = WorkloadControllers
	}
	// The ServiceAccount controller is how the start is seen (controllerManagerWorks).
	controllers = append(slices.Clone(controllers), "serviceaccount-controller")
	path, err := binaryPath(binKubeControllerManager)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, errors.New("starting the controller manager of a stopped control plane")
	}
	p, err := c.start(binKubeControllerManager, path, c.controllerManagerArgs(strings.Join(controllers, ",")))
	if err == nil {
		c.components = append(c.components, p)
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, runtimeReadyTimeout, func(ctx context.Context) error { return controllerManagerWorks(ctx, client) }); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p.stop, nil
}

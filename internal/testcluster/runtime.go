package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// runtimeReadyTimeout bounds how long the controller manager, scheduler and kwok may take
// to show that they work once the API server is ready.
const runtimeReadyTimeout = 60 * time.Second

// fakeNodeName is the one Node kwok plays the kubelet for.
const fakeNodeName = "kwok-node-0"

// RuntimeOptions configures StartRuntime. The zero value is what most tests want.
type RuntimeOptions struct {
	// CRDDirectoryPaths lists directories or files with CRDs to install before StartRuntime
	// returns. Nil installs none: the operator installs module CRDs into runtimes itself.
	CRDDirectoryPaths []string
	// KeepDir keeps Dir (logs, etcd data, kubeconfig) after Stop, for debugging.
	KeepDir bool
}

// Runtime is a managed cluster (an SKR) whose workloads become ready: besides etcd and
// kube-apiserver it runs kube-controller-manager, kube-scheduler and kwok with one fake
// Node, so that Deployments become Available in about a second with no container runtime.
// Module readiness checks therefore see what they see in a real cluster.
type Runtime struct {
	*Cluster
	// crdPaths are the CRDs of RuntimeOptions, installed again by ReplaceWithEmpty.
	crdPaths []string
}

// StartRuntime starts the runtime's processes, creates the fake Node and returns once the
// Node is Ready, the controller manager works (the default ServiceAccount exists) and the
// CRDs are Established. ctx bounds only the start: the runtime runs until Stop (or the end
// of the test binary). On error nothing is left running.
func StartRuntime(ctx context.Context, opts RuntimeOptions) (*Runtime, error) {
	// The ServiceAccount admission plugin stays on, unlike in ControlPlane: the controller
	// manager creates default ServiceAccounts here, and Pods should be admitted as in a
	// real cluster.
	c, err := newCluster(ctx, "runtime", opts.KeepDir, nil)
	if err != nil {
		return nil, fmt.Errorf("starting a runtime: %w", err)
	}
	r := &Runtime{Cluster: c, crdPaths: opts.CRDDirectoryPaths}
	if err := r.startWorkloadComponents(ctx, r.crdPaths); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("starting a runtime: %w", err)
	}
	return r, nil
}

// ReplaceWithEmpty turns the runtime into a new, empty cluster behind the same address, as
// a runtime rebuilt from scratch under an unchanged kubeconfig looks to its clients: every
// process stops, etcd's data is removed, and etcd and the API server start again on the same
// ports with the same certificates (so Config, Kubeconfig and existing clients stay valid),
// followed by the workload components, the fake Node and the CRDs of RuntimeOptions, as
// StartRuntime sets them up. It returns once the runtime is as ready as StartRuntime leaves
// it. On error the runtime is unusable and should be stopped.
func (r *Runtime) ReplaceWithEmpty(ctx context.Context) error {
	if err := r.wipe(ctx); err != nil {
		return fmt.Errorf("replacing the runtime with an empty one: %w", err)
	}
	if err := r.startWorkloadComponents(ctx, r.crdPaths); err != nil {
		return fmt.Errorf("replacing the runtime with an empty one: %w", err)
	}
	return nil
}

// wipe stops every process, removes etcd's data and starts etcd and the API server again.
func (r *Runtime) wipe(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("the runtime is stopped")
	}
	var errs []error
	for i := len(r.components) - 1; i >= 0; i-- {
		errs = append(errs, r.components[i].stop())
	}
	r.components = nil
	for _, p := range []*process{r.apiServer, r.etcd} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(r.dir, "etcd")); err != nil {
		return fmt.Errorf("removing etcd's data: %w", err)
	}
	if err := r.restartEtcdLocked(ctx); err != nil {
		return err
	}
	return r.restartAPIServerLocked(ctx)
}

func (r *Runtime) startWorkloadComponents(ctx context.Context, crdPaths []string) error {
	components, err := r.startComponents()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(r.config)
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, fakeNode(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the fake node: %w", err)
	}
	// CRDs go in while the components start.
	if err := installCRDs(ctx, r.config, crdPaths); err != nil {
		return err
	}
	return waitComponentsReady(ctx, client, components)
}

// componentSpec is one workload component: its binary and arguments.
type componentSpec struct {
	name string
	args []string
}

// componentSpecs are the controller manager, the scheduler and kwok.
func (r *Runtime) componentSpecs() ([]componentSpec, error) {
	kwokConfig := filepath.Join(r.dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, []byte(kwokStages()), 0o600); err != nil {
		return nil, fmt.Errorf("writing the kwok configuration: %w", err)
	}
	return []componentSpec{
		// The token controller needs the service-account private key and creates legacy
		// token Secrets nobody here uses.
		{binKubeControllerManager, r.controllerManagerArgs("*,-serviceaccount-token")},
		{binKubeScheduler, r.componentAuth()},
		{binKwok, []string{
			"--kubeconfig=" + r.kubeconfigPath,
			"--config=" + kwokConfig,
			"--manage-all-nodes=true",
			// Renew the Node's Lease, so that the node lifecycle controller does not mark
			// the Node unreachable and evict its Pods in long dev sessions.
			"--node-lease-duration-seconds=40",
		}},
	}, nil
}

// startComponents starts the workload components, by binary name.
func (r *Runtime) startComponents() (map[string]*process, error) {
	specs, err := r.componentSpecs()
	if err != nil {
		return nil, err
	}
	components := make(map[string]*process, len(specs))
	r.mu.Lock()
	for _, s := range specs {
		path, err := binaryPath(s.name)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		p, err := r.start(s.name, path, s.args)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.components = append(r.components, p)
		components[s.name] = p
	}
	r.mu.Unlock()

	return components, nil
}

// waitComponentsReady waits for the fake Node to be Ready (kwok), the default
// ServiceAccount (controller manager), and checks the scheduler still runs.
func waitComponentsReady(ctx context.Context, client kubernetes.Interface, components map[string]*process) error {
	err := components[binKwok].waitReady(ctx, runtimeReadyTimeout, func(ctx context.Context) error {
		node, err := client.CoreV1().Nodes().Get(ctx, fakeNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready", fakeNodeName)
	})
	if err != nil {
		return err
	}
	err = components[binKubeControllerManager].waitReady(ctx, runtimeReadyTimeout, func(ctx context.Context) error {
		return controllerManagerWorks(ctx, client)
	})
	if err != nil {
		return err
	}
	// The scheduler has no cheap readiness signal with --secure-port=0; a Pod scheduled
	// later proves it. Catch at least a scheduler that died on bad flags.
	if sched := components[binKubeScheduler]; !sched.running() {
		return sched.exitError()
	}
	return nil
}

// kwokStages is kwok's --config: the Stages kwok's own "fast" presets use, which move a Node
// to Ready and Pods to Running/Ready (and Succeeded, and gone on deletion) at once, plus the
// lease heartbeat that keeps the Node Ready. Without Stages kwok exits "no stages found".
func kwokStages() string {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(d)
	}
	return strings.Join(docs, "\n---\n") + "\n"
}

// fakeNode is the Node kwok manages: capacity far above anything a test schedules, and no
// taint, so that Pods without tolerations land on it like on an ordinary node.
func fakeNode() *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fakeNodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": fakeNodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Allocatable: resources, Capacity: resources},
	}
}

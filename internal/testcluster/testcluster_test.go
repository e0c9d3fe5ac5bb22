package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Shared by the tests: one of each, started once, because a start costs seconds.
var (
	controlPlane   *ControlPlane
	runtimeCluster *Runtime
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()

	start := time.Now()
	cp, err := StartControlPlane(ctx, ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopOrReport(cp.Cluster)
	fmt.Printf("control plane started in %.1f s\n", time.Since(start).Seconds())

	start = time.Now()
	rt, err := StartRuntime(ctx, RuntimeOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopOrReport(rt.Cluster)
	fmt.Printf("runtime started in %.1f s\n", time.Since(start).Seconds())

	controlPlane, runtimeCluster = cp, rt
	return m.Run()
}

func stopOrReport(c *Cluster) {
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping a test cluster:", err)
	}
}

func TestControlPlaneServesProjectCRDs(t *testing.T) {
	g := NewWithT(t)
	client, err := dynamic.NewForConfig(controlPlane.Config())
	g.Expect(err).NotTo(HaveOccurred())

	kymas := schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}
	list, err := client.Resource(kymas).List(t.Context(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(BeEmpty())

	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range []string{
		"kymas.operator.kyma-project.io",
		"manifests.operator.kyma-project.io",
		"moduletemplates.operator.kyma-project.io",
	} {
		crd, err := client.Resource(crds).Get(t.Context(), name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(crd.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("conditions",
			ContainElement(SatisfyAll(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True")))),
		), name)
	}
}

func TestRuntimeMakesDeploymentAvailable(t *testing.T) {
	g := NewWithT(t)
	client, err := kubernetes.NewForConfig(runtimeCluster.Config())
	g.Expect(err).NotTo(HaveOccurred())
	ns := createNamespace(t, client)

	labels := map[string]string{"app": "sample"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app",
					// Never pulled: kwok plays the kubelet.
					Image: "registry.invalid/sample:1.0.0",
				}}},
			},
		},
	}
	created := time.Now()
	_, err = client.AppsV1().Deployments(ns).Create(t.Context(), deployment, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func(g Gomega) {
		got, err := client.AppsV1().Deployments(ns).Get(t.Context(), "sample", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status.AvailableReplicas).To(Equal(int32(2)))
		g.Expect(got.Status.Conditions).To(ContainElement(SatisfyAll(
			HaveField("Type", appsv1.DeploymentAvailable),
			HaveField("Status", corev1.ConditionTrue),
		)))
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	t.Logf("deployment available %.1f s after creation", time.Since(created).Seconds())

	pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(2))
	for _, pod := range pods.Items {
		g.Expect(pod.Spec.NodeName).To(Equal(fakeNodeName))
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}
}

func TestParallelClustersAreIsolatedAndStopCleanly(t *testing.T) {
	g := NewWithT(t)

	type result struct {
		cluster *Cluster
		err     error
	}
	cpDone, rtDone := make(chan result, 1), make(chan result, 1)
	go func() {
		cp, err := StartControlPlane(t.Context(), ControlPlaneOptions{})
		if err != nil {
			cpDone <- result{err: err}
			return
		}
		cpDone <- result{cluster: cp.Cluster}
	}()
	go func() {
		rt, err := StartRuntime(t.Context(), RuntimeOptions{})
		if err != nil {
			rtDone <- result{err: err}
			return
		}
		rtDone <- result{cluster: rt.Cluster}
	}()
	var clusters []*Cluster
	for _, done := range []chan result{cpDone, rtDone} {
		r := <-done
		if r.cluster != nil {
			t.Cleanup(func() { _ = r.cluster.Stop() })
			clusters = append(clusters, r.cluster)
		}
		g.Expect(r.err).NotTo(HaveOccurred())
	}

	hosts := map[string]bool{controlPlane.Config().Host: true, runtimeCluster.Config().Host: true}
	dirs := map[string]bool{controlPlane.Dir(): true, runtimeCluster.Dir(): true}
	for _, c := range clusters {
		hosts[c.Config().Host] = true
		dirs[c.Dir()] = true

		// Through both the rest.Config and the kubeconfig, as binaries use that.
		fromKubeconfig, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig())
		g.Expect(err).NotTo(HaveOccurred())
		fromFile, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
		g.Expect(err).NotTo(HaveOccurred())
		for _, cfg := range []*rest.Config{c.Config(), fromKubeconfig, fromFile} {
			client, err := kubernetes.NewForConfig(cfg)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = client.Discovery().ServerVersion()
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	g.Expect(hosts).To(HaveLen(4), "every cluster has its own port")
	g.Expect(dirs).To(HaveLen(4), "every cluster has its own directory")

	// The CA of one cluster must not be trusted by another.
	otherCA := configTrustingCAOf(clusters[0], clusters[1])
	client, err := kubernetes.NewForConfig(otherCA)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = client.Discovery().ServerVersion()
	g.Expect(err).To(MatchError(ContainSubstring("certificate")))

	for _, c := range clusters {
		pids := c.pids()
		g.Expect(len(pids)).To(BeNumerically(">=", 2))
		g.Expect(c.Stop()).To(Succeed())
		for _, pid := range pids {
			g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "pid %d still exists", pid)
		}
		g.Expect(c.Dir()).NotTo(BeADirectory())
	}
}

// configTrustingCAOf returns a's admin config trusting b's CA instead of a's own.
func configTrustingCAOf(a, b *Cluster) *rest.Config {
	cfg := a.Config()
	cfg.CAData = b.Config().CAData
	return cfg
}

func TestAPIServerRestartKeepsData(t *testing.T) {
	g := NewWithT(t)
	client, err := kubernetes.NewForConfig(runtimeCluster.Config())
	g.Expect(err).NotTo(HaveOccurred())
	ns := createNamespace(t, client)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns},
		Data:       map[string]string{"key": "value"},
	}
	_, err = client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(runtimeCluster.StopAPIServer()).To(Succeed())
	// Start it again even if an assertion below fails, for the tests that run later.
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = runtimeCluster.StartAPIServer(context.Background())
		}
	})
	_, err = client.CoreV1().ConfigMaps(ns).Get(t.Context(), "survivor", metav1.GetOptions{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(apierrors.IsNotFound(err)).To(BeFalse(), "the API server must be unreachable, not answering")
	g.Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "got %v", err)

	start := time.Now()
	g.Expect(runtimeCluster.StartAPIServer(t.Context())).To(Succeed())
	restarted = true
	t.Logf("API server restarted in %.1f s", time.Since(start).Seconds())
	g.Expect(runtimeCluster.StartAPIServer(t.Context())).To(MatchError(ContainSubstring("already running")))

	// The same client (same port, same CA) finds the object from before.
	got, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), "survivor", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Data).To(Equal(cm.Data))
}

func TestEtcdRestartKeepsData(t *testing.T) {
	g := NewWithT(t)
	client, err := kubernetes.NewForConfig(controlPlane.Config())
	g.Expect(err).NotTo(HaveOccurred())
	ns := createNamespace(t, client)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stored", Namespace: ns}, Data: map[string]string{"key": "value"}}
	created, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(controlPlane.StopEtcd()).To(Succeed())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = controlPlane.StartEtcd(context.Background())
		}
	})
	// The API server answers, but cannot store anything.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: ns}}, metav1.CreateOptions{})
	g.Expect(err).To(HaveOccurred(), "a write without etcd must fail")
	g.Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeFalse(), "the API server itself stays up: %v", err)

	g.Expect(controlPlane.StartEtcd(t.Context())).To(Succeed())
	restarted = true
	g.Expect(controlPlane.StartEtcd(t.Context())).To(MatchError(ContainSubstring("already running")))
	g.Eventually(func(g Gomega) {
		got, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), "stored", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.UID).To(Equal(created.UID), "the same object, from the same data")
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func TestReplaceWithEmptyKeepsAddressAndCredentials(t *testing.T) {
	g := NewWithT(t)
	client, err := kubernetes.NewForConfig(runtimeCluster.Config())
	g.Expect(err).NotTo(HaveOccurred())
	host, kubeconfig := runtimeCluster.Config().Host, runtimeCluster.Kubeconfig()
	ns, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "old-"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(runtimeCluster.ReplaceWithEmpty(t.Context())).To(Succeed())

	g.Expect(runtimeCluster.Config().Host).To(Equal(host))
	g.Expect(runtimeCluster.Kubeconfig()).To(Equal(kubeconfig))
	// The client from before reaches the new cluster, which has nothing of the old one but
	// what a fresh runtime has: the Node and the controllers' default ServiceAccounts.
	_, err = client.CoreV1().Namespaces().Get(t.Context(), ns.Name, metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old cluster's namespace is gone: %v", err)
	node, err := client.CoreV1().Nodes().Get(t.Context(), fakeNodeName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.Status.Conditions).To(ContainElement(SatisfyAll(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
	_, err = client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(t.Context(), "default", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestCommandIsKilledWithItsGroup(t *testing.T) {
	g := NewWithT(t)
	cmd, err := StartCommand("/bin/sh", []string{"-c", "echo started; sleep 60 & wait"}, t.TempDir()+"/sh.log")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { return cmd.LogTail(5) }).WithTimeout(10 * time.Second).Should(Equal("started"))
	g.Expect(cmd.Running()).To(BeTrue())
	g.Expect(cmd.ExitError()).To(Succeed())

	g.Expect(cmd.Kill()).To(Succeed())
	g.Expect(cmd.Running()).To(BeFalse())
	g.Expect(cmd.ExitError()).To(MatchError(ContainSubstring("signal: killed")))
	// The orphaned child is reaped by init a moment later.
	g.Eventually(func() error { return syscall.Kill(-cmd.Pid(), 0) }).WithTimeout(10*time.Second).
		Should(MatchError(syscall.ESRCH), "the child (sleep) was killed with the group")
}

func TestMissingBinaryTellsHowToBuildIt(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	_, err := StartControlPlane(t.Context(), ControlPlaneOptions{CRDDirectoryPaths: []string{}})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("make testbin")))
}

// createNamespace creates a namespace of its own for one test and deletes it afterwards.
func createNamespace(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
	}, metav1.CreateOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// A benchmark measures with a feature gate of the API server off; the gate must reach the
// API server, or the run measures the default without saying so. The API server's own
// kubernetes_feature_enabled metric says what it runs with.
func TestAPIServerArgsReachTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	cp, err := StartControlPlane(t.Context(), ControlPlaneOptions{
		CRDDirectoryPaths: []string{},
		APIServerArgs:     []string{"--feature-gates=DetectCacheInconsistency=false"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer stopOrReport(cp.Cluster)

	featureEnabled := func(c *Cluster) string {
		client, err := kubernetes.NewForConfig(c.Config())
		g.Expect(err).NotTo(HaveOccurred())
		metrics, err := client.RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		for line := range strings.Lines(string(metrics)) {
			if strings.HasPrefix(line, "kubernetes_feature_enabled{") && strings.Contains(line, `name="DetectCacheInconsistency"`) {
				return strings.TrimSpace(line[strings.LastIndexByte(line, ' '):])
			}
		}
		return "missing"
	}
	g.Expect(featureEnabled(cp.Cluster)).To(Equal("0"), "the gate turned off by APIServerArgs")
	g.Expect(featureEnabled(controlPlane.Cluster)).To(Equal("1"), "Kubernetes' default, where no argument turns it off")
}

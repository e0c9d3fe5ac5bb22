package install

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// The control planes here run no containers, so the installation is proven
// the way a kubelet would run it, minus the container: config/default is
// applied for real, and the operator binary runs with the Deployment's flags
// under its ServiceAccount's token. It must become ready, win leader
// election, create the default Watcher and the watcher CA, and be refused
// nothing.
func TestRenderedOperatorRunsAsItsServiceAccount(t *testing.T) {
	objs, err := install.RenderKustomize(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	apply(ctx, t, objs)

	kubeconfig := serviceAccountKubeconfig(ctx, t, "kcp-system", "lifecycle-manager")
	args, probes := podArgs(t, deploymentOf(t, objs, "kcp-system").Spec.Template.Spec.Containers[0].Args)
	bin := buildOperator(t)
	logPath := filepath.Join(t.TempDir(), "operator.log")
	cmd, err := testcluster.StartCommand(bin, append(args, "--kubeconfig="+kubeconfig), logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Kill() })
	explain := func() string { return "operator log:\n" + cmd.LogTail(40) }

	waitFor(ctx, t, "the operator to become ready", explain, func() (bool, error) {
		if err := cmd.ExitError(); err != nil {
			return false, err
		}
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	waitFor(ctx, t, "the operator to win leader election", explain, func() (bool, error) {
		lease := &coordinationv1.Lease{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: "kcp-system", Name: "lifecycle-manager.operator.kyma-project.io"}, lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", client.IgnoreNotFound(err)
	})
	waitFor(ctx, t, "the default Watcher and the watcher CA", explain, func() (bool, error) {
		watchers := &v1beta2.WatcherList{}
		if err := admin.List(ctx, watchers, client.InNamespace("kcp-system")); err != nil {
			return false, err
		}
		ca := &corev1.Secret{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: "lifecycle-manager-pki", Name: "watcher-ca"}, ca)
		return len(watchers.Items) > 0 && err == nil, client.IgnoreNotFound(err)
	})
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "forbidden") {
		t.Errorf("the operator was refused a request; config/rbac lacks a right:\n%s", log)
	}
}

// apply applies objs for real, server-side, Namespaces and CRDs first.
func apply(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, first := range []bool{true, false} {
		for _, obj := range objs {
			if forReal(obj) != first {
				continue
			}
			if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner("install-test"), client.ForceOwnership); err != nil {
				t.Fatalf("applying %s: %v", key(obj), err)
			}
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates to the
// control plane with a token of the ServiceAccount, as a pod's would.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, namespace, name string) string {
	t.Helper()
	cfg := kcp.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kcp"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: serviceAccountToken(ctx, t, namespace, name)}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: "operator"}
	kc.CurrentContext = "operator"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// serviceAccountToken is a token of the ServiceAccount, as a pod's would be.
func serviceAccountToken(ctx context.Context, t *testing.T, namespace, name string) string {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(kcp.Config())
	if err != nil {
		t.Fatal(err)
	}
	token, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return token.Status.Token
}

// podArgs maps the Deployment's flags to this machine as a pod's network
// and volumes would: each listening port to a free loopback port, the
// content cache's mount to a directory. It returns the probes' address.
func podArgs(t *testing.T, args []string) ([]string, string) {
	t.Helper()
	var probes string
	out := make([]string, 0, len(args))
	for _, arg := range args {
		name, value, _ := strings.Cut(arg, "=")
		switch name {
		case "--metrics-bind-address", "--health-probe-bind-address", "--listener-address":
			addr := freeAddress(t)
			if name == "--health-probe-bind-address" {
				probes = addr
			}
			arg = name + "=" + addr
		case "--content-cache-dir":
			arg = name + "=" + filepath.Join(t.TempDir(), strings.TrimPrefix(value, "/"))
		}
		out = append(out, arg)
	}
	if probes == "" {
		t.Fatalf("the Deployment's flags %v set no probe address", args)
	}
	return out, probes
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// buildOperator builds cmd/lifecycle-manager, the binary the image holds.
func buildOperator(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lifecycle-manager")
	if err := testcluster.GoBuild(root, "./cmd/lifecycle-manager", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

func waitFor(ctx context.Context, t *testing.T, what string, explain func() string, done func() (bool, error)) {
	t.Helper()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		ok, err := done()
		if err != nil {
			t.Fatalf("waiting for %s: %v\n%s", what, err, explain())
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v\n%s", what, fmt.Errorf("timed out"), explain())
		case <-ticker.C:
		}
	}
}

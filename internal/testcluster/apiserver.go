package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiServerReadyTimeout is generous because two cores starting several API servers at once
// are slow; readiness is polled, so a fast start never waits for it.
const apiServerReadyTimeout = 90 * time.Second

// StopAPIServer kills the kube-apiserver and leaves etcd and all other processes running,
// so that a test can make the cluster unreachable the way a failed runtime is.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiServer == nil {
		return nil
	}
	return c.apiServer.stop()
}

// StartAPIServer starts the kube-apiserver again on the same port with the same etcd data
// and certificates, so that existing clients and kubeconfigs keep working, and returns once
// it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("starting the API server of a stopped cluster")
	}
	if c.apiServer != nil && c.apiServer.running() {
		return errors.New("the API server is already running")
	}
	return c.restartAPIServerLocked(ctx)
}

// restartAPIServerLocked starts the kube-apiserver with the arguments it had. c.mu must be
// held.
func (c *Cluster) restartAPIServerLocked(ctx context.Context) error {
	var err error
	// The port is fixed now, so there is nothing to change between attempts; a bind failure
	// is retried only because the old socket may take a moment to be released.
	for range portAttempts {
		if err = c.startAPIServerLocked(ctx); err == nil || !errors.Is(err, errPortInUse) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// setAPIServerPort fixes the API server's port and derives everything that names it: the
// arguments, the admin rest.Config and kubeconfig.
func (c *Cluster) setAPIServerPort(port int, extraArgs []string) error {
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	c.config = &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.certs.caCert,
			CertData: c.certs.adminCert,
			KeyData:  c.certs.adminKey,
		},
		QPS:   ClientQPS,
		Burst: ClientBurst,
	}
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"testcluster": {Server: host, CertificateAuthorityData: c.certs.caCert},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			"admin": {ClientCertificateData: c.certs.adminCert, ClientKeyData: c.certs.adminKey},
		},
		Contexts: map[string]*clientcmdapi.Context{
			"testcluster": {Cluster: "testcluster", AuthInfo: "admin"},
		},
		CurrentContext: "testcluster",
	})
	if err != nil {
		return fmt.Errorf("encoding the admin kubeconfig: %w", err)
	}
	c.kubeconfig = kubeconfig
	c.kubeconfigPath = filepath.Join(c.dir, "admin.kubeconfig")
	if err := os.WriteFile(c.kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	c.apiServerArgs = append([]string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The endpoint reconciler refuses loopback addresses, and no Pod here could reach
		// the API server through the kubernetes Service anyway.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.dir, "pki"),
		"--tls-cert-file=" + c.certs.servingCertFile,
		"--tls-private-key-file=" + c.certs.servingKeyFile,
		"--client-ca-file=" + c.certs.caCertFile,
		"--service-account-key-file=" + c.certs.saPublicKeyFile,
		"--service-account-signing-key-file=" + c.certs.saSigningKeyFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/24",
		// RBAC, not AlwaysAllow: tests check that the operator's roles are least privilege.
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		// The benchmark writes in parallel; the defaults (400/200) would throttle it.
		"--max-requests-inflight=1000",
		"--max-mutating-requests-inflight=500",
	}, extraArgs...)
	return nil
}

// startAPIServerLocked starts the kube-apiserver with c.apiServerArgs and waits until
// /readyz answers 200 to the admin client. c.mu must be held.
func (c *Cluster) startAPIServerLocked(ctx context.Context) error {
	path, err := binaryPath(binKubeAPIServer)
	if err != nil {
		return err
	}
	p, err := c.start(binKubeAPIServer, path, c.apiServerArgs)
	if err != nil {
		return err
	}
	c.apiServer = p
	httpClient, err := rest.HTTPClientFor(c.config)
	if err != nil {
		return fmt.Errorf("creating an HTTP client for the API server: %w", err)
	}
	err = p.waitReady(ctx, apiServerReadyTimeout, func(ctx context.Context) error {
		return apiServerReady(ctx, httpClient, c.config.Host)
	})
	if err != nil {
		_ = p.stop()
		if p.bindFailed() {
			return fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return err
	}
	return nil
}

func apiServerReady(ctx context.Context, client *http.Client, host string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("/readyz: %s %s", resp.Status, body)
	}
	return nil
}

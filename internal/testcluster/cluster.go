package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"k8s.io/client-go/rest"
)

// Client limits of Config. Tests, the benchmark and the dev environment create objects in
// bursts; client-go's defaults (5 QPS, burst 10) would make them measure the client-side
// rate limiter instead of the code under test.
const (
	ClientQPS   = 200
	ClientBurst = 400
)

// portAttempts bounds the retries when a freshly picked port was taken before the binary
// bound it.
const portAttempts = 5

// errPortInUse marks a start that failed because the port was taken meanwhile.
var errPortInUse = errors.New("port in use")

// Cluster is what control planes and runtimes have in common: an etcd, a kube-apiserver
// with its own PKI, admin credentials and a directory with data, certificates and logs.
// Use it through ControlPlane or Runtime.
type Cluster struct {
	dir            string
	keepDir        bool
	certs          *clusterCerts
	apiServerArgs  []string
	etcdArgs       []string
	etcdURL        string
	config         *rest.Config
	kubeconfig     []byte
	kubeconfigPath string

	mu        sync.Mutex
	etcd      *process
	apiServer *process
	// components run against the API server (controller manager, scheduler, kwok) and are
	// stopped before it.
	components []*process
	// started holds every process ever started, so that tests can check none survives Stop.
	started []*process
	stopped bool
}

// Config returns a copy of the admin rest.Config (client certificate in system:masters), so
// that callers can change it (user agent, impersonation) without affecting each other.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.config) }

// Kubeconfig returns the admin kubeconfig with the CA and client certificate embedded, for
// code that takes kubeconfigs (e.g. the runtime kubeconfig Secrets the operator reads).
func (c *Cluster) Kubeconfig() []byte { return append([]byte(nil), c.kubeconfig...) }

// KubeconfigPath is the admin kubeconfig as a file in Dir, for binaries and for kubectl
// while debugging a kept cluster.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// Dir holds the cluster's etcd data, certificates, kubeconfig and one log per process.
func (c *Cluster) Dir() string { return c.dir }

// Stop kills all of the cluster's processes, waits until they are gone and removes Dir
// unless KeepDir was set. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	for i := len(c.components) - 1; i >= 0; i-- {
		errs = append(errs, c.components[i].stop())
	}
	for _, p := range []*process{c.apiServer, c.etcd} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	if !c.keepDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", c.dir, err))
		}
	}
	return errors.Join(errs...)
}

// newCluster creates the directory and PKI, starts etcd and kube-apiserver and waits until
// the API server is ready. extraAPIServerArgs differ between control planes and runtimes.
func newCluster(ctx context.Context, kind string, keepDir bool, extraAPIServerArgs []string) (_ *Cluster, err error) {
	staleDirsOnce.Do(removeStaleDirs)
	dir, err := os.MkdirTemp("", dirPrefix+kind+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the %s directory: %w", kind, err)
	}
	c := &Cluster{dir: dir, keepDir: keepDir}
	defer func() {
		if err != nil {
			// The returned error carries the log tails; the directory is kept only on request.
			_ = c.Stop()
		}
	}()
	if !keepDir {
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", ownerFile, err)
		}
	}

	pki := filepath.Join(dir, "pki")
	if err := os.Mkdir(pki, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", pki, err)
	}
	if c.certs, err = writeCerts(pki); err != nil {
		return nil, err
	}
	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		if err := c.setAPIServerPort(ports[0], extraAPIServerArgs); err != nil {
			return nil, err
		}
		err = c.startAPIServerLocked(ctx)
		if err == nil {
			return c, nil
		}
		if attempt == portAttempts || !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
}

// dirPrefix starts the name of every cluster directory in os.TempDir.
const dirPrefix = "testcluster-"

// ownerFile in a cluster directory holds the PID of the process that created it. A test
// binary killed by a timeout or SIGKILL cannot remove its directories (over 100 MB each,
// mostly etcd's preallocated WAL); the next start removes those whose owner is gone.
// Directories kept on request have no ownerFile and are never removed.
const ownerFile = "owner.pid"

var staleDirsOnce sync.Once

// removeStaleDirs removes cluster directories left behind by test binaries that no longer
// run. Best effort: whatever fails to go stays for the next try.
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// start starts one process with its log in Dir and records it for Stop.
func (c *Cluster) start(name, path string, args []string) (*process, error) {
	p, err := startProcess(name, path, args, filepath.Join(c.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	c.started = append(c.started, p)
	return p, nil
}

// pids returns the process IDs of every process the cluster ever started.
func (c *Cluster) pids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make([]int, 0, len(c.started))
	for _, p := range c.started {
		pids = append(pids, p.pid())
	}
	return pids
}

package testcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// etcdReadyTimeout is generous because two cores starting several clusters at once are
// slow; readiness is polled, so a fast start never waits for it.
const etcdReadyTimeout = 30 * time.Second

// etcdQuotaBackendBytes is far above etcd's 2 GiB default because the benchmark writes
// hundreds of thousands of objects into one cluster.
const etcdQuotaBackendBytes = 8 << 30

// startEtcd starts etcd on fresh ports, retrying with other ports when one was taken.
func (c *Cluster) startEtcd(ctx context.Context) error {
	path, err := binaryPath(binEtcd)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		args := []string{
			"--name=default",
			"--data-dir=" + filepath.Join(c.dir, "etcd"),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			// Test data does not need to survive a power cut; fsync dominates write latency.
			"--unsafe-no-fsync=true",
			"--quota-backend-bytes=" + strconv.Itoa(etcdQuotaBackendBytes),
			"--log-level=warn",
		}
		p, err := c.start(binEtcd, path, args)
		if err != nil {
			return err
		}
		c.etcd, c.etcdURL = p, clientURL
		err = p.waitReady(ctx, etcdReadyTimeout, func(ctx context.Context) error {
			return etcdHealthy(ctx, clientURL)
		})
		if err == nil {
			return nil
		}
		_ = p.stop()
		if attempt == portAttempts || !p.bindFailed() {
			return err
		}
		_ = os.RemoveAll(filepath.Join(c.dir, "etcd"))
	}
}

func etcdHealthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
	}
	return nil
}

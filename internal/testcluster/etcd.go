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
	"strings"
	"time"
)

// etcdReadyTimeout is generous because two cores starting several clusters at once are
// slow; readiness is polled, so a fast start never waits for it.
const etcdReadyTimeout = 30 * time.Second

// etcdQuotaBackendBytes is far above etcd's 2 GiB default because the benchmark writes
// hundreds of thousands of objects into one cluster.
const etcdQuotaBackendBytes = 8 << 30

// StopEtcd kills etcd and leaves the API server and all other processes running, so that a
// test can make the cluster's storage fail the way an etcd outage does: the API server
// answers, but cannot read or write.
func (c *Cluster) StopEtcd() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.etcd == nil {
		return nil
	}
	return c.etcd.stop()
}

// StartEtcd starts etcd again on the same ports with the same data directory, so that the
// running API server reconnects to it and finds everything stored before, and returns once
// etcd is healthy.
func (c *Cluster) StartEtcd(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("starting etcd of a stopped cluster")
	}
	if c.etcd != nil && c.etcd.running() {
		return errors.New("etcd is already running")
	}
	return c.restartEtcdLocked(ctx)
}

// restartEtcdLocked starts etcd with the arguments it had, retrying a bind failure because
// the old sockets may take a moment to be released. c.mu must be held.
func (c *Cluster) restartEtcdLocked(ctx context.Context) error {
	var err error
	for range portAttempts {
		if err = c.startEtcdProcess(ctx); err == nil || !errors.Is(err, errPortInUse) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// startEtcd starts etcd on fresh ports, retrying with other ports when one was taken.
func (c *Cluster) startEtcd(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		c.setEtcdPorts(ports[0], ports[1])
		err = c.startEtcdProcess(ctx)
		if err == nil {
			return nil
		}
		if attempt == portAttempts || !errors.Is(err, errPortInUse) {
			return err
		}
		_ = os.RemoveAll(filepath.Join(c.dir, "etcd"))
	}
}

// setEtcdPorts fixes etcd's client and peer ports and derives its arguments and URL.
func (c *Cluster) setEtcdPorts(clientPort, peerPort int) {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.etcdURL = clientURL
	c.etcdArgs = []string{
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
}

// startEtcdProcess starts etcd with c.etcdArgs and waits until it is healthy; a start that
// failed because a port was taken is marked with errPortInUse.
func (c *Cluster) startEtcdProcess(ctx context.Context) error {
	path, err := binaryPath(binEtcd)
	if err != nil {
		return err
	}
	p, err := c.start(binEtcd, path, c.etcdArgs)
	if err != nil {
		return err
	}
	c.etcd = p
	err = p.waitReady(ctx, etcdReadyTimeout, func(ctx context.Context) error {
		return etcdHealthy(ctx, c.etcdURL)
	})
	if err == nil {
		return nil
	}
	_ = p.stop()
	if p.bindFailed() {
		return fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
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

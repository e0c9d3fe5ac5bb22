package faults

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// TestKCPAPIServerRestartMidInstall stops the control plane's API server in
// the middle of an install: two modules Ready, two installed and waiting
// for their operator, two just added to the Kyma (their Manifests being
// written). The runtime side finishes meanwhile; once the API server is back
// on the same address, everything converges, with one Manifest per module
// and nothing reinstalled.
func TestKCPAPIServerRestartMidInstall(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	env.gates.set(true, gatedRange(0, 2)...)
	env.gates.set(false, gatedRange(2, 6)...)
	k := newKyma(t, "kcp-apiserver", env.runtimes[mainRuntime], modules(gatedRange(0, 4)...)...)
	k.eventuallyMidInstall(gatedRange(0, 2), gatedRange(2, 4))
	manifests := k.manifests(Default, gatedRange(0, 4)...)
	objects := k.runtimeObjects(Default)
	expectObjectsOf(Default, objects, gatedRange(0, 4)...)

	k.addModules(gatedRange(4, 6)...)
	mark := env.operator.logSize()
	Expect(env.kcp.StopAPIServer()).To(Succeed())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.kcp.StartAPIServer(context.Background())
		}
	})
	// The modules' operators finish their work while the control plane is
	// away, so the operator has status to write and must meet the fault (the
	// Kyma's new modules alone may not reach it: the API server can stop
	// before their watch event is sent).
	env.gates.set(true, gatedRange(2, 6)...)
	waitForOperatorError(mark)
	Expect(env.kcp.StartAPIServer(context.Background())).To(Succeed())
	restarted = true

	k.eventuallyReady(gatedRange(0, 6)...)
	k.expectSameManifests(manifests, gatedRange(0, 6)...)
	after := k.runtimeObjects(Default)
	expectNoneDeleted(objects, after)
	expectObjectsOf(Default, after, gatedRange(0, 6)...)
}

// etcdOutage is how long the control plane's etcd is down: many of the
// operator's requeue intervals, well within the API server's request timeout.
const etcdOutage = 20 * time.Second

// TestKCPEtcdRestart stops the control plane's etcd mid-install: the API
// server stays up but can neither read nor write. etcd comes back with the
// same data; the install finishes with the same Manifests and nothing
// reinstalled.
func TestKCPEtcdRestart(t *testing.T) {
	RegisterTestingT(t)
	env.operator.reportOnFailure(t)
	env.gates.set(true, gatedRange(0, 2)...)
	env.gates.set(false, gatedRange(2, 4)...)
	k := newKyma(t, "kcp-etcd", env.runtimes[mainRuntime], modules(gatedRange(0, 4)...)...)
	k.eventuallyMidInstall(gatedRange(0, 2), gatedRange(2, 4))
	manifests := k.manifests(Default, gatedRange(0, 4)...)
	objects := k.runtimeObjects(Default)

	Expect(env.kcp.StopEtcd()).To(Succeed())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.kcp.StartEtcd(context.Background())
		}
	})
	// The modules' operators finish meanwhile, so the operator has status to
	// write, and its writes hang: the API server waits for etcd for a
	// minute or more before failing them, so to the operator an etcd outage
	// is requests that hang, not errors.
	env.gates.set(true, gatedRange(2, 4)...)
	Consistently(func(g Gomega) {
		g.Expect(kcpEtcdHealthy()).NotTo(Succeed(), "the control plane's etcd is down")
	}, etcdOutage, time.Second).Should(Succeed())
	Expect(env.kcp.StartEtcd(context.Background())).To(Succeed())
	restarted = true

	k.eventuallyReady(gatedRange(0, 4)...)
	k.expectSameManifests(manifests, gatedRange(0, 4)...)
	after := k.runtimeObjects(Default)
	expectNoneDeleted(objects, after)
	expectObjectsOf(Default, after, gatedRange(0, 4)...)
}

// kcpEtcdHealthy asks the control plane's API server whether it reaches etcd.
func kcpEtcdHealthy() error {
	httpClient, err := rest.HTTPClientFor(env.kcp.Config())
	if err != nil {
		return err
	}
	httpClient.Timeout = 5 * time.Second
	resp, err := httpClient.Get(env.kcp.Config().Host + "/readyz/etcd")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz/etcd: %s", resp.Status)
	}
	return nil
}

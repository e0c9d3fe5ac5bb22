package lmctl_test

import (
	"bytes"
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// TestStatusWatchListsOnceThenWatches runs lmctl status -w against a real
// control plane while Kymas come, change state and go, and counts what the
// API server served it: one list of the Kymas and then a watch, however
// many changes it prints. Polling a list a second per watching SRE is a
// load of its own at 5,000 Kymas (issue 30).
func TestStatusWatchListsOnceThenWatches(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "fleet-w"
	cp, kcp := controlPlaneWith(t, ns)
	kymaRequests := func(verb string) float64 {
		n, err := cp.Requests(ctx, func(l map[string]string) bool {
			return l["resource"] == "kymas" && l["verb"] == verb
		})
		g.Expect(err).NotTo(HaveOccurred())
		return n
	}
	listsBefore, watchesBefore := kymaRequests("LIST"), kymaRequests("WATCH")

	watchCtx, stop := context.WithCancel(ctx)
	cmd := exec.CommandContext(watchCtx, lmctlBin, "status", "-w", "-o", "json", "-n", ns, "--kubeconfig", cp.KubeconfigPath())
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { stop(); _ = cmd.Wait() })
	g.Eventually(out.String).WithTimeout(time.Minute).Should(ContainSubstring(`"runtimes": []`))

	// Kymas come, one turns Ready, one goes: each change is printed.
	for _, name := range []string{"watched-0", "watched-1", "watched-2"} {
		g.Expect(kcp.Create(ctx, &v1beta2.Kyma{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       v1beta2.KymaSpec{Channel: "regular"},
		})).To(Succeed())
		g.Eventually(out.String).WithTimeout(time.Minute).Should(ContainSubstring(`"name": "` + name + `"`))
	}
	ready := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "watched-1", Namespace: ns}}
	g.Expect(kcp.Status().Patch(ctx, ready, client.RawPatch(types.MergePatchType, []byte(`{"status":{"state":"Ready"}}`)))).To(Succeed())
	g.Eventually(out.String).WithTimeout(time.Minute).Should(ContainSubstring(`"state": "Ready"`))
	g.Expect(kcp.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "watched-0", Namespace: ns}})).To(Succeed())
	g.Eventually(func() string {
		// The last printed fleet no longer names watched-0.
		s := out.String()
		return s[bytes.LastIndex([]byte(s), []byte(`"runtimes"`)):]
	}).WithTimeout(time.Minute).ShouldNot(ContainSubstring("watched-0"))

	// No polling: while lmctl watches, it asks for no list, however long.
	lists := kymaRequests("LIST")
	g.Consistently(func() float64 { return kymaRequests("LIST") }).WithTimeout(3*time.Second).Should(Equal(lists), "lmctl status -w polls the Kymas")
	// client-go streams the first list in its watch where the API server
	// can (WatchList), else it lists once.
	g.Expect(lists-listsBefore).To(BeNumerically("<=", 1), "lmctl status -w lists the Kymas at most once")
	g.Expect(kymaRequests("GET")).To(BeZero(), "lmctl status -w reads no Kyma one by one")
	// The API server counts a watch when it ends.
	stop()
	_ = cmd.Wait()
	g.Eventually(func() float64 { return kymaRequests("WATCH") - watchesBefore }).Should(BeNumerically(">=", 1), "lmctl status -w watches the Kymas")
}

// controlPlaneWith starts a control plane of the test's own, with the
// namespace ns, and a client of it.
func controlPlaneWith(t *testing.T, ns string) (*testcluster.ControlPlane, client.Client) {
	t.Helper()
	cp, err := testcluster.StartControlPlane(context.Background(), testcluster.ControlPlaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kcp := kubeClient(t, cp.KubeconfigPath())
	if err := kcp.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return cp, kcp
}

// lockedBuffer is a process's output read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

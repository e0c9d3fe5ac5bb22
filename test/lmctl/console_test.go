package lmctl_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os/exec"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// TestConsoleServesTheFleetToItsUser runs lmctl console against a real
// control plane: the URL it prints opens the fleet page with the
// namespace's Kyma, and the same address without the token is refused.
func TestConsoleServesTheFleetToItsUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	kcp := kubeClient(t, cp.KubeconfigPath())
	const ns = "fleet-console"
	g.Expect(kcp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(kcp.Create(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: "seen-in-console", Namespace: ns}, Spec: v1beta2.KymaSpec{Channel: "regular"}})).To(Succeed())

	consoleCtx, stop := context.WithCancel(ctx)
	cmd := exec.CommandContext(consoleCtx, lmctlBin, "console", "-n", ns, "--kubeconfig", cp.KubeconfigPath())
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { stop(); _ = cmd.Wait() })
	printed := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?token=[0-9a-f]+`)
	g.Eventually(out.String).WithTimeout(time.Minute).Should(MatchRegexp(printed.String()))
	m := printed.FindStringSubmatch(out.String())

	g.Eventually(func(g Gomega) {
		status, body, err := openConsole(m[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`data-runtime="seen-in-console"`))
	}).WithTimeout(time.Minute).Should(Succeed())

	resp, err := http.Get(m[1] + "/")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
}

// openConsole opens a local console's URL as a browser does: the token in
// the URL is traded for a cookie, and the redirect followed with it. It
// returns the fleet page's status and body.
func openConsole(url string) (int, string, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := (&http.Client{Jar: jar}).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

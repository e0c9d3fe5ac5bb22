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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// consolePage opens a console URL that carries its token, as a browser
// does (the token becomes a cookie), and returns the page.
func consolePage(g Gomega, url string) string {
	jar, err := cookiejar.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := (&http.Client{Jar: jar}).Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	return string(body)
}

// TestConsoleServesTheFleetToItsUser runs lmctl console against a real
// control plane: the URL it prints opens the fleet page with the
// namespace's Kyma, and the same address without the token is refused.
func TestConsoleServesTheFleetToItsUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "fleet-console"
	cp, kcp := controlPlaneWith(t, ns)
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

	g.Eventually(func(g Gomega) string { return consolePage(g, m[0]) }).WithTimeout(time.Minute).Should(ContainSubstring(`data-runtime="seen-in-console"`))

	resp, err := http.Get(m[1] + "/")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
}

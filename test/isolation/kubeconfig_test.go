package isolation

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	kymactrl "github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
)

// listener counts every request it gets, and remembers whether any carried
// credentials: a refused kubeconfig must never reach it.
type listener struct {
	*httptest.Server
	requests  atomic.Int64
	withToken atomic.Int64
}

func newListener(t *testing.T, useTLS bool) *listener {
	t.Helper()
	l := &listener{}
	l.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			l.withToken.Add(1)
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	if useTLS {
		l.StartTLS()
	} else {
		l.Start()
	}
	t.Cleanup(l.Close)
	return l
}

// caPEM is the PEM certificate a TLS listener serves, so that a kubeconfig
// can trust it.
func (l *listener) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Certificate().Raw})
}

// hostileKubeconfig writes a kubeconfig with one cluster and one user, whose
// bodies are given as YAML lines.
func hostileKubeconfig(cluster, user string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: rt
contexts:
- name: rt
  context: {cluster: rt, user: rt}
clusters:
- name: rt
  cluster:
    %s
users:
- name: rt
  user:
    %s
`, cluster, user))
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestKubeconfigIsDataNeverCode registers runtimes whose kubeconfigs would
// run a program in the operator, send a token read from the operator's files
// to a listener of ours, skip TLS verification towards it, or route through
// it as a proxy. Each is refused before any connection: the program never
// runs, the listener never hears from the operator, and the Kyma says which
// field is refused and what to do. Putting a kubeconfig with inline
// credentials into the Secret then makes the Kyma converge.
func TestKubeconfigIsDataNeverCode(t *testing.T) {
	rt := env.runtimes[1]
	cfg := rt.Config()
	server := fmt.Sprintf("server: %s\n    certificate-authority-data: %s", cfg.Host, b64(cfg.CAData))
	certUser := fmt.Sprintf("client-certificate-data: %s\n    client-key-data: %s", b64(cfg.CertData), b64(cfg.KeyData))

	tlsListener := newListener(t, true)
	proxy := newListener(t, false)
	marker := filepath.Join(t.TempDir(), "exec-ran")
	tokenFile := filepath.Join(t.TempDir(), "token")
	const fileToken = "operator-service-account-token-stand-in"
	const inlineToken = "inline-token-of-the-runtime"
	if err := os.WriteFile(tokenFile, []byte(fileToken), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name       string
		kubeconfig []byte
		field      string
		fix        string // part of what the condition tells to do
	}{
		{
			name:       "exec",
			kubeconfig: hostileKubeconfig(server, fmt.Sprintf(`exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, "touch %s"]}`, marker)),
			field:      "users[0].user.exec",
			fix:        "a client certificate (client-certificate-data and client-key-data) or a token",
		},
		{
			name: "tokenfile",
			kubeconfig: hostileKubeconfig(
				fmt.Sprintf("server: %s\n    certificate-authority-data: %s", tlsListener.URL, b64(tlsListener.caPEM())),
				"tokenFile: "+tokenFile),
			field: "users[0].user.tokenFile",
			fix:   "put the token inline in token",
		},
		{
			name:       "insecure",
			kubeconfig: hostileKubeconfig(fmt.Sprintf("server: %s\n    insecure-skip-tls-verify: true", tlsListener.URL), "token: "+inlineToken),
			field:      "clusters[0].cluster.insecure-skip-tls-verify",
			fix:        "put the runtime's CA in certificate-authority-data",
		},
		{
			name:       "proxy",
			kubeconfig: hostileKubeconfig(server+"\n    proxy-url: "+proxy.URL, certUser),
			field:      "clusters[0].cluster.proxy-url",
			fix:        "connects to the server directly",
		},
	}

	kymas := make([]*testKyma, len(cases))
	for i, c := range cases {
		// Each Kyma has its own sync namespace, so that all of them can
		// share the one runtime once their Secrets are fixed.
		kymas[i] = newKyma(t, "kubeconfig-"+c.name, rt.Kubeconfig(), c.kubeconfig, "kubeconfig-"+c.name, moduleName(0))
	}

	for i, c := range cases {
		k := kymas[i]
		var refused time.Time
		NewWithT(t).Eventually(func(g Gomega) {
			kyma := k.get(g)
			cond := readyCondition(g, kyma)
			g.Expect(cond.Reason).To(Equal(kymactrl.ReasonKubeconfigRefused), "Kyma %s: %s", k.name, describe(kyma))
			g.Expect(cond.Message).To(ContainSubstring(c.field), "the condition names the refused field")
			g.Expect(cond.Message).To(ContainSubstring(k.name+"-kubeconfig"), "the condition names the Secret")
			g.Expect(cond.Message).To(ContainSubstring(c.fix), "the condition says what to do instead")
			g.Expect(cond.Message).NotTo(Or(ContainSubstring(inlineToken), ContainSubstring(fileToken), ContainSubstring(b64(cfg.KeyData))),
				"the condition carries no credential")
			g.Expect(string(kyma.Status.State)).To(Equal("Error"))
			refused = cond.LastTransitionTime.Time
		}, timeout, interval).Should(Succeed())

		// Terminal and stable: no flapping while the Secret stays as it is.
		NewWithT(t).Consistently(func(g Gomega) {
			cond := readyCondition(g, k.get(g))
			g.Expect(cond.Reason).To(Equal(kymactrl.ReasonKubeconfigRefused))
			g.Expect(cond.LastTransitionTime.Time).To(Equal(refused))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	}

	_, err := os.Stat(marker)
	NewWithT(t).Expect(os.IsNotExist(err)).To(BeTrue(), "the exec plugin ran inside the operator (stat: %v)", err)
	NewWithT(t).Expect(tlsListener.requests.Load()).To(BeZero(), "a refused kubeconfig reached its server")
	NewWithT(t).Expect(tlsListener.withToken.Load()).To(BeZero(), "a token was sent to a refused kubeconfig's server")
	NewWithT(t).Expect(proxy.requests.Load()).To(BeZero(), "a refused kubeconfig's proxy was used")

	// Inline credentials are accepted: the Kymas converge.
	for _, k := range kymas {
		k.setKubeconfig(t, rt.Kubeconfig())
	}
	for _, k := range kymas {
		NewWithT(t).Eventually(func(g Gomega) {
			kyma := k.get(g)
			g.Expect(string(kyma.Status.State)).To(Equal("Ready"), "Kyma %s: %s", k.name, describe(kyma))
		}, timeout, interval).Should(Succeed())
	}
	_, err = os.Stat(marker)
	NewWithT(t).Expect(os.IsNotExist(err)).To(BeTrue(), "the exec plugin ran inside the operator")
}

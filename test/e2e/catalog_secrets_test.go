package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// Credentials a content link carries: a password in its user info and a
// token in its query, as a pre-signed URL has.
const (
	linkUser     = "puller"
	linkPassword = "link-password-7f3a"
	linkToken    = "token=query-token-91c2"
)

// credentialedWebServer serves files only to requests that carry both the
// link's basic-auth credentials and its query token, so a module from it
// installs only if the operator used them.
func credentialedWebServer(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, password, ok := r.BasicAuth()
		if !ok || user != linkUser || password != linkPassword || r.URL.RawQuery != linkToken {
			http.Error(w, "credentials required", http.StatusUnauthorized)
			return
		}
		data, found := files[r.URL.Path]
		if !found {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(server.Close)
	return server
}

// credentialedLink is the link to path on server with the credentials in it,
// pinned to digest.
func credentialedLink(server *httptest.Server, path string, digest [32]byte) string {
	host := strings.TrimPrefix(server.URL, "http://")
	return "http://" + linkUser + ":" + linkPassword + "@" + host + path + "?" + linkToken + "#sha256=" + hex.EncodeToString(digest[:])
}

// TestCatalogCopiesCarryNoLinkCredentials checks item 7 of issue 10: a
// template whose link carries a password and a query token installs (the
// operator uses them), its copy in the runtime keeps the link and its pin
// but neither credential, and when the link fails, the error mirrored into
// the runtime's Kyma quotes the link without them too.
func TestCatalogCopiesCarryNoLinkCredentials(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "secret-link"
	content := goodManifest(name, "1.0.0")
	server := credentialedWebServer(t, map[string][]byte{"/module.yaml": content})

	link := credentialedLink(server, "/module.yaml", sha256.Sum256(content))
	template := samplemodules.Version{Module: name, Version: "1.0.0"}.Template(kcpNamespace, map[string]string{v1beta2.RawManifestResourceName: link})
	template.Spec.Info.Repository = "https://" + linkUser + ":" + linkPassword + "@git.example.invalid/" + name + "?" + linkToken
	g.Expect(env.kcpClient.Create(ctx, template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, template) })
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})

	k := newKyma(t, module(name))
	expectModuleReadyAt(t, k, name, "1.0.0")

	host := strings.TrimPrefix(server.URL, "http://")
	digest := sha256.Sum256(content)
	g.Eventually(func(g Gomega) {
		copied, err := k.runtimeTemplate(template.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(copied.Spec.Resources).To(Equal([]v1beta2.ContentResource{{
			Name: v1beta2.RawManifestResourceName,
			Link: "http://" + host + "/module.yaml#sha256=" + hex.EncodeToString(digest[:]),
		}}), "the runtime's copy keeps where the content is and its pin")
		g.Expect(copied.Spec.Info.Repository).To(Equal("https://git.example.invalid/" + name))
		encoded, err := json.Marshal(copied)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(encoded)).NotTo(Or(ContainSubstring(linkPassword), ContainSubstring(linkToken), ContainSubstring(linkUser)))
	}, timeout, interval).Should(Succeed())

	// 2.0.0 links to content the server does not have: the Manifest's event
	// names the link without the credentials; no status quotes them (nor the
	// link: conditions carry the error's class only).
	broken := samplemodules.Version{Module: name, Version: "2.0.0"}.Template(kcpNamespace, map[string]string{
		v1beta2.RawManifestResourceName: credentialedLink(server, "/missing.yaml", sha256.Sum256([]byte("missing"))),
	})
	g.Expect(env.kcpClient.Create(ctx, broken)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, broken) })
	setChannel(t, name, "regular", "2.0.0")
	expectModuleErrorKeepsInstalled(t, k, name, "missing.yaml")
	g.Eventually(func(g Gomega) {
		remote := k.runtimeKyma(g)
		g.Expect(remote.Status.Modules).To(ContainElement(And(
			HaveField("Name", name), HaveField("State", v1beta2.StateError))))
		encoded, err := json.Marshal(remote.Status)
		g.Expect(err).NotTo(HaveOccurred())
		notes := strings.Join(manifestWarnings(g, kyma.ManifestName(k.name, name)), "\n")
		g.Expect(notes).To(ContainSubstring(host + "/missing.yaml"))
		g.Expect(notes).NotTo(Or(ContainSubstring(linkPassword), ContainSubstring(linkToken), ContainSubstring(linkUser+":")))
		g.Expect(string(encoded)).NotTo(Or(ContainSubstring(linkPassword), ContainSubstring(linkToken), ContainSubstring(linkUser+":")))
	}, timeout, interval).Should(Succeed())
}

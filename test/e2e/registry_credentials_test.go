package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// registryCredentialsSecret is the dockerconfigjson Secret the operator under
// test is told to use (--registry-credentials-secret).
const registryCredentialsSecret = "e2e-registry-credentials"

// privateRegistry is go-containerregistry's registry behind an HTTP basic
// auth check whose password a test can rotate: the real OCI protocol, with
// the challenge a private registry answers anonymous clients with.
type privateRegistry struct {
	server *httptest.Server

	mu       sync.Mutex
	user     string
	password string
}

func startPrivateRegistry(t *testing.T, user, password string) *privateRegistry {
	t.Helper()
	p := &privateRegistry{user: user, password: password}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	p.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.allowed(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(p.server.Close)
	return p
}

func (p *privateRegistry) allowed(r *http.Request) bool {
	user, password, ok := r.BasicAuth()
	p.mu.Lock()
	defer p.mu.Unlock()
	return ok && user == p.user && password == p.password
}

// rotate makes the registry accept only the new password.
func (p *privateRegistry) rotate(password string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.password = password
}

func (p *privateRegistry) host() string { return strings.TrimPrefix(p.server.URL, "http://") }

// staticKeychain is the module team's own push credential.
type staticKeychain authn.AuthConfig

func (s staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return authn.FromConfig(authn.AuthConfig(s)), nil
}

// publishPrivate pushes a module version with the registry's current
// credentials and creates its ModuleTemplate.
func (p *privateRegistry) publish(t *testing.T, module, version string) {
	t.Helper()
	g := NewWithT(t)
	p.mu.Lock()
	push := staticKeychain{Username: p.user, Password: p.password}
	p.mu.Unlock()
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:%s", p.host(), module, version),
		ociartifact.Module{RawManifest: goodManifest(module, version)}.Layers(), ociartifact.Insecure(), ociartifact.WithKeychain(push))
	g.Expect(err).NotTo(HaveOccurred())
	template := samplemodules.Version{Module: module, Version: version}.Template(kcpNamespace, artifact.Links)
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
}

// setRegistryCredentials writes the operator's dockerconfigjson Secret.
func setRegistryCredentials(t *testing.T, dockerConfig string) {
	t.Helper()
	g := NewWithT(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: registryCredentialsSecret, Namespace: kcpNamespace},
		Type:       corev1.SecretTypeDockerConfigJson,
	}
	g.Eventually(func(g Gomega) {
		err := env.kcpClient.Get(context.Background(), client.ObjectKeyFromObject(secret), secret)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		secret.Data = map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfig)}
		if err != nil {
			g.Expect(env.kcpClient.Create(context.Background(), secret)).To(Succeed())
			return
		}
		g.Expect(env.kcpClient.Update(context.Background(), secret)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func dockerConfig(host, user, password string) string {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
}

// expectModuleErrorWithout waits for the module to report Error and for
// its Manifest's events to give the cause, and checks that no status, in the
// control plane or the runtime, nor any event quotes any of the secrets.
func expectModuleErrorWithout(t *testing.T, k *testKyma, module, message string, secrets ...string) {
	t.Helper()
	g := NewWithT(t)
	var shown string
	defer func() { t.Logf("Module %s: %s", module, shown) }()
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, module)
		shown = m.Message
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		notes := manifestWarnings(g, kyma.ManifestName(k.name, module))
		g.Expect(notes).To(ContainElement(ContainSubstring(message)))
		manifest := &v1beta2.Manifest{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, module)}, manifest)).To(Succeed())
		texts := describe(k.get(g)) + fmt.Sprint(manifest.Status) + describe(k.runtimeKyma(g)) + strings.Join(notes, "\n")
		for _, secret := range secrets {
			g.Expect(texts).NotTo(ContainSubstring(secret))
		}
	}, timeout, interval).Should(Succeed())
}

// TestPrivateRegistryCredentialsAreReadLive checks item 8 of issue 10: a
// module in a registry that requires credentials is in Error with a clear
// message while the operator's credentials Secret is missing or malformed,
// installs once the Secret is right, and keeps installing new versions
// after the registry's password and the Secret are rotated, without a
// restart. No status quotes a password.
func TestPrivateRegistryCredentialsAreReadLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		name      = "private-module"
		password1 = "first-password-4b1d"
		password2 = "second-password-8e2c"
	)
	reg := startPrivateRegistry(t, "robot", password1)
	reg.publish(t, name, "1.0.0")
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	t.Cleanup(func() {
		_ = env.kcpClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registryCredentialsSecret, Namespace: kcpNamespace}})
	})

	// No Secret: the registry refuses the anonymous operator.
	k := newKyma(t, module(name))
	expectModuleErrorWithout(t, k, name, "the registry needs credentials: give the operator a --registry-credentials-secret", password1)

	// A Secret whose entry cannot be decoded (the API server only checks
	// that it is JSON) says so, without quoting it.
	noColon := base64.StdEncoding.EncodeToString([]byte(password1))
	setRegistryCredentials(t, fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host(), noColon))
	expectModuleErrorWithout(t, k, name, "holds no valid docker config", password1, noColon)

	// The right Secret: the module installs.
	setRegistryCredentials(t, dockerConfig(reg.host(), "robot", password1))
	expectModuleReadyAt(t, k, name, "1.0.0")

	// The registry's password is rotated and 2.0.0 published: the old
	// credentials are refused ...
	reg.rotate(password2)
	reg.publish(t, name, "2.0.0")
	setChannel(t, name, "regular", "2.0.0")
	expectModuleErrorWithout(t, k, name, "401 Unauthorized", password1, password2)

	// ... until the Secret is rotated too; the operator reads it live.
	setRegistryCredentials(t, dockerConfig(reg.host(), "robot", password2))
	expectModuleReadyAt(t, k, name, "2.0.0")
}

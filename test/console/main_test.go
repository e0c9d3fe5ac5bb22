// Package console tests the fleet console (internal/console) in a real
// browser: headless Chromium (internal/testbrowser) opens the console's
// pages, served over TCP by the console handler, whose informers read a
// real control plane where the operator manages two real runtimes. Viewers
// are ServiceAccounts; their bearer tokens are checked by a TokenReview and
// their rights by SubjectAccessReviews (internal/console/consoleauth), as in
// the cluster. One control plane and one browser serve every test.
package console

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/console"
	"github.com/runtime-fleet/lifecycle-manager/internal/console/consoleauth"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testbrowser"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

const kcpNamespace = "kcp-system"

// The fleet: kyma-a runs the sample module in runtime 0; kyma-b the
// evolving module in runtime 1; kyma-live the sample module in runtime 1,
// whose state the live test changes from inside the runtime; kyma-lost's
// kubeconfig points at an address where no API server listens, so it is
// unreachable and must never show as Ready.
const (
	kymaA    = "kyma-a"
	kymaB    = "kyma-b"
	kymaLive = "kyma-live"
	kymaLost = "kyma-lost"
)

// secretMarker is in every Secret the tests create besides the runtimes'
// kubeconfigs, whose own keys are checked too: no response of the console
// may contain either.
const secretMarker = "s3cr3t-marker-7f3a9c"

// screenshots is where the tests save what the pages look like, for
// docs/console.md.
var screenshots = screenshotDir()

// screenshotDir is $LM_SCREENSHOTS (make screenshots: docs/console, which
// docs/console.md shows), else a directory of the machine's: a test run
// does not rewrite the committed images.
func screenshotDir() string {
	if dir := os.Getenv("LM_SCREENSHOTS"); dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), "lifecycle-manager-console-screenshots")
}

var env struct {
	kcp     client.Client
	rt      []*testcluster.Runtime
	browser *testbrowser.Browser
	// url is the console's address.
	url string
	// fleetViewer may list the operator's resources in kcpNamespace;
	// outsider is authenticated and may list nothing there. Both are
	// ServiceAccount tokens.
	fleetViewer, outsider string
	// secrets are the values no response may contain: the marker and the
	// runtimes' client keys and tokens.
	secrets []string
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "console", Runtimes: 2, Namespace: kcpNamespace}, setup)
}

func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.rt = e.Client, e.Runtimes
	registry := testregistry.Start()
	e.Cleanup(registry.Close)
	if err := publishModules(ctx, registry.Host()); err != nil {
		return operator.Options{}, fmt.Errorf("publishing the sample modules: %w", err)
	}
	for _, r := range e.Runtimes {
		go func() { _ = samplemodules.RunSampleOperator(ctx, r.Config(), 100*time.Millisecond) }()
	}
	if err := registerFleet(ctx); err != nil {
		return operator.Options{}, fmt.Errorf("registering the fleet: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(e.KCP.Config())
	if err != nil {
		return operator.Options{}, err
	}
	if env.fleetViewer, env.outsider, err = viewers(ctx, clientset); err != nil {
		return operator.Options{}, fmt.Errorf("creating the viewers: %w", err)
	}
	handler, err := console.New(console.Options{
		Config:        e.KCP.Config(),
		Namespace:     kcpNamespace,
		Authenticator: consoleauth.NewTokenReviewer(clientset.AuthenticationV1().TokenReviews(), consoleauth.TokenReviewerOptions{}),
		Access:        consoleauth.NewSubjectAccess(clientset.AuthorizationV1().SubjectAccessReviews(), consoleauth.CacheOptions{}),
	})
	if err != nil {
		return operator.Options{}, fmt.Errorf("creating the console: %w", err)
	}
	go func() {
		if err := handler.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "console stopped:", err)
		}
	}()
	srv := httptest.NewServer(handler)
	e.Cleanup(srv.Close)
	env.url = srv.URL

	if env.browser, err = testbrowser.Start(testbrowser.Options{}); err != nil {
		return operator.Options{}, err
	}
	e.Cleanup(env.browser.Close)

	opts := e.OperatorOptions()
	opts.Content.InsecureRegistries = []string{registry.Host()}
	return opts, nil
}

// publishModules pushes the bundled modules and creates their templates
// and channels: the evolving module has two, so the module page lists
// two versions.
func publishModules(ctx context.Context, registry string) error {
	templates, err := samplemodules.Publish(ctx, registry, kcpNamespace, ociartifact.Insecure())
	if err != nil {
		return err
	}
	for _, t := range templates {
		if err := env.kcp.Create(ctx, t); err != nil {
			return err
		}
	}
	for module, channels := range map[string]map[string]string{
		samplemodules.Sample:   {"regular": "1.0.0"},
		samplemodules.Evolving: {"regular": "1.0.0", "fast": "2.0.0"},
	} {
		if err := env.kcp.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, module, channels)); err != nil {
			return err
		}
	}
	return nil
}

// registerFleet creates the Kymas, their kubeconfig Secrets, and a Secret
// that only holds the marker, named and labelled like kyma-a's things (not
// with the kyma-name label, which the operator requires on one Secret per
// Kyma, its kubeconfig) so that a console that showed Secrets would show it.
func registerFleet(ctx context.Context) error {
	// No API server listens on port 1; the token is the marker, so that a
	// served kubeconfig would give it away.
	lost := fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: lost, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: lost, user: {token: %q}}]
contexts: [{name: lost, context: {cluster: lost, user: lost}}]
current-context: lost
`, secretMarker)
	kymas := []struct {
		name, module string
		kubeconfig   []byte
	}{
		{kymaA, samplemodules.Sample, env.rt[0].Kubeconfig()},
		{kymaB, samplemodules.Evolving, env.rt[1].Kubeconfig()},
		{kymaLive, samplemodules.Sample, env.rt[1].Kubeconfig()},
		{kymaLost, samplemodules.Sample, lost},
	}
	for _, k := range kymas {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: k.name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: k.name}},
			Data:       map[string][]byte{"config": k.kubeconfig},
		}
		kyma := &v1beta2.Kyma{
			ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace, Labels: map[string]string{"team": "console-test"}},
			Spec: v1beta2.KymaSpec{Channel: "regular", Modules: []v1beta2.Module{
				{Name: k.module, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete},
			}},
		}
		for _, obj := range []client.Object{secret, kyma} {
			if err := env.kcp.Create(ctx, obj); err != nil {
				return err
			}
		}
	}
	marker := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kymaA + "-credentials", Namespace: kcpNamespace, Labels: map[string]string{"team": "console-test"}},
		StringData: map[string]string{"password": secretMarker},
	}
	if err := env.kcp.Create(ctx, marker); err != nil {
		return err
	}
	env.secrets = []string{secretMarker}
	for _, r := range env.rt {
		env.secrets = append(env.secrets, credentialsOf(r.Config().KeyData, r.Config().BearerToken)...)
	}
	return nil
}

// viewers creates two ServiceAccounts and returns a token of each: the
// fleet viewer, bound to a Role that reads the operator's resources in
// kcpNamespace, and the outsider, bound to nothing.
func viewers(ctx context.Context, clientset kubernetes.Interface) (fleetViewer, outsider string, err error) {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-viewer", Namespace: kcpNamespace},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1beta2.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-viewer", Namespace: kcpNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "fleet-viewer", Namespace: kcpNamespace}},
	}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fleet-viewer", Namespace: kcpNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "outsider", Namespace: kcpNamespace}},
		role, binding,
	} {
		if err := env.kcp.Create(ctx, obj); err != nil {
			return "", "", err
		}
	}
	token := func(name string) (string, error) {
		t, err := clientset.CoreV1().ServiceAccounts(kcpNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("requesting a token of ServiceAccount %s: %w", name, err)
		}
		return t.Status.Token, nil
	}
	if fleetViewer, err = token("fleet-viewer"); err != nil {
		return "", "", err
	}
	outsider, err = token("outsider")
	return fleetViewer, outsider, err
}

// credentialsOf are the secret parts of a runtime's credentials that a
// response could hold: the token, a line from the middle of the client key
// (as a PEM would show it) and the middle of the key in base64 (as a
// kubeconfig's client-key-data would).
func credentialsOf(key []byte, token string) []string {
	var found []string
	if token != "" {
		found = append(found, token)
	}
	if len(key) == 0 {
		return found
	}
	lines := strings.Split(strings.TrimSpace(string(key)), "\n")
	found = append(found, lines[len(lines)/2])
	b64 := base64.StdEncoding.EncodeToString(key)
	return append(found, b64[len(b64)/2-20:len(b64)/2+20])
}

package install

import (
	"context"
	"crypto/tls"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

const consoleName = "lifecycle-manager-console"

// consoleObjects renders the chart with the console enabled into ns and
// returns the console's own objects (those labelled as its component).
func consoleObjects(t *testing.T, ns string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	console := map[string]any{"enabled": true}
	for k, v := range values {
		console[k] = v
	}
	rendered, err := install.RenderChart(chart, ns, map[string]any{"console": console})
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, obj := range rendered.Objects() {
		if obj.GetLabels()["app.kubernetes.io/component"] == "console" {
			out = append(out, obj)
		}
	}
	return out
}

// The chart leaves the console out by default.
func TestChartHasNoConsoleByDefault(t *testing.T) {
	rendered, err := install.RenderChart(chart, "kcp-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range rendered.Objects() {
		if strings.Contains(obj.GetName(), "console") {
			t.Errorf("the chart at its defaults installs %s", key(obj))
		}
	}
}

// The console's rendered RBAC, applied to a real API server, lets its
// ServiceAccount read the CRs it shows and review tokens and access, and
// nothing about Secrets, anywhere; and nothing it may not need, such as
// writing a Kyma. Its Deployment runs the console mode under that account,
// and the binary in that mode serves HTTPS under the account's token,
// refusing a request without credentials.
func TestConsoleCannotReadSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "console-install-"}}
	g.Expect(admin.Create(ctx, namespace)).To(Succeed())
	ns := namespace.Name
	objs := consoleObjects(t, ns, nil)
	for _, want := range []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "NetworkPolicy"} {
		g.Expect(slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == want })).To(BeTrue(), "the console lacks a %s", want)
	}
	apply(ctx, t, objs)

	clientset, err := kubernetes.NewForConfig(kcp.Config())
	g.Expect(err).NotTo(HaveOccurred())
	user := "system:serviceaccount:" + ns + ":" + consoleName
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	may := func(verb, group, resource, namespace string) bool {
		review, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace},
		}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return review.Status.Allowed
	}
	// RBAC reaches the authorizer through its informer.
	g.Eventually(func() bool { return may("list", "operator.kyma-project.io", "kymas", ns) }, time.Minute, 100*time.Millisecond).Should(BeTrue())
	g.Eventually(func() bool { return may("create", "authorization.k8s.io", "subjectaccessreviews", "") }, time.Minute, 100*time.Millisecond).Should(BeTrue())
	g.Expect(may("create", "authentication.k8s.io", "tokenreviews", "")).To(BeTrue())
	for _, resource := range []string{"kymas", "moduletemplates", "modulereleasemetas", "modulerollouts", "runtimebackups", "manifests"} {
		g.Expect(may("watch", "operator.kyma-project.io", resource, ns)).To(BeTrue(), "the console may not watch %s", resource)
	}
	for _, namespace := range []string{ns, "", "kube-system", "lifecycle-manager-pki"} {
		for _, verb := range []string{"get", "list", "watch"} {
			g.Expect(may(verb, "", "secrets", namespace)).To(BeFalse(), "the console may %s secrets in %q", verb, namespace)
		}
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		g.Expect(may(verb, "operator.kyma-project.io", "kymas", ns)).To(BeFalse(), "the read-only console may %s kymas", verb)
	}
	g.Expect(may("create", "", "serviceaccounts/token", ns)).To(BeFalse(), "the console may mint tokens")

	d := deploymentNamed(t, objs, ns, consoleName)
	pod := d.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(consoleName))
	args := pod.Containers[0].Args
	g.Expect(args).To(HaveExactElements(
		"console", "--namespace="+ns, "--address=:8443", "--access-cache-ttl=30s"))

	// The console mode of the binary, with the Deployment's flags, under the
	// ServiceAccount's token.
	bin := buildOperator(t)
	addr := freeAddress(t)
	args = slices.Clone(args)
	args[slices.Index(args, "--address=:8443")] = "--address=" + addr
	cmd, err := testcluster.StartCommand(bin, append(args, "--kubeconfig="+serviceAccountKubeconfig(ctx, t, ns, consoleName)), t.TempDir()+"/console.log")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cmd.Kill() })
	// The self-signed certificate is not what this test checks.
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	status := func(path, token string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	g.Eventually(func() (int, error) {
		if err := cmd.ExitError(); err != nil {
			g.Expect(err).NotTo(HaveOccurred(), cmd.LogTail(20))
		}
		return status("/healthz", "")
	}, time.Minute, 100*time.Millisecond).Should(Equal(http.StatusOK), "the console does not serve /healthz")
	g.Expect(status("/", "")).To(Equal(http.StatusUnauthorized))
	g.Expect(status("/", "garbage")).To(Equal(http.StatusUnauthorized))
	// A real token of an account without rights: reviewed (the console may
	// review tokens and access) and refused.
	g.Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: ns}})).To(Succeed())
	nobody := serviceAccountToken(ctx, t, ns, "nobody")
	g.Expect(status("/", nobody)).To(Equal(http.StatusForbidden), cmd.LogTail(20))
	g.Expect(cmd.LogTail(200)).NotTo(ContainSubstring("forbidden"), "the console was refused a request; its RBAC lacks a right")
}

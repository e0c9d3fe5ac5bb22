package content

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch/linkcorpus"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// admissionNamespace stands for the KCP namespace of an installation of
// config/admission: the shipped files name kcp-system, which an SRE
// replaces with the operator's --namespace, as these tests do. (The
// operator of the other tests keeps kcp-system, unaffected.)
const admissionNamespace = "kcp-admission"

// The refusals of the shipped policy, as the tests tell them apart.
const (
	unreadableLink = "is not one the operator reads"
	notAllowedHost = "which is not an allowed content host"
)

// The shipped ValidatingAdmissionPolicy refuses a ModuleTemplate whose links
// leave the allowed hosts, with a message saying what to do, and admits
// one whose links stay on them.
func TestAdmissionRefusesTemplatesLinkingOtherHosts(t *testing.T) {
	g := NewWithT(t)
	installAdmission(t, admissionNamespace, "registry.allowed.example,*.example.org,127.0.0.1:5000")
	digest := "@sha256:" + strings.Repeat("ab", 32)

	refusal := admit(admissionNamespace, "bad", "oci://registry.allowed.example/modules/bad"+digest, "https://evil.example.net/crds.yaml")
	g.Expect(refusal).To(MatchError(ContainSubstring(
		"ModuleTemplate bad-1.0.0 links content on evil.example.net, which is not an allowed content host " +
			"(registry.allowed.example, *.example.org, 127.0.0.1:5000). Publish the content to an allowed registry, " +
			"or ask the SREs to add the host to ConfigMap " + admissionNamespace + "/lifecycle-manager-content-hosts")))
	t.Logf("Refused: %v", refusal)

	unreadable := admit(admissionNamespace, "unreadable", "oci://registry.allowed.example/modules/x"+digest, "https://registry.allowed.example/m.yaml#v1")
	g.Expect(unreadable).To(MatchError(ContainSubstring(
		"ModuleTemplate unreadable-1.0.0: the link of crds is not one the operator reads. Write oci://host/repo:tag")))
	t.Logf("Refused: %v", unreadable)

	for name, link := range map[string]string{
		"other-port":     "oci://127.0.0.1:5001/modules/x" + digest,
		"lookalike":      "https://example.org.evil.example/m.yaml",
		"userinfo-trick": "https://registry.allowed.example@evil.example.net/m.yaml",
		"query-trick":    "https://evil.example.net?@registry.allowed.example/m.yaml",
	} {
		g.Expect(admit(admissionNamespace, name, link)).To(MatchError(ContainSubstring(notAllowedHost)), name)
	}
	g.Expect(admit(admissionNamespace, "missing-host", "oci:///modules/x"+digest)).To(MatchError(ContainSubstring(unreadableLink)))
	for name, links := range map[string][]string{
		"good":        {"oci://registry.allowed.example/modules/good" + digest, "oci://registry.allowed.example:443/modules/good:1.0.0"},
		"subdomain":   {"https://charts.example.org/sample.tgz", "https://user:pw@cdn.charts.example.org/crds.yaml"},
		"listed-port": {"oci://127.0.0.1:5000/modules/x" + digest},
	} {
		g.Expect(admit(admissionNamespace, name, links...)).To(Succeed(), name)
	}
}

// The shipped policy and the operator read every link of the corpus alike:
// both refuse it as unreadable, or both read the same host from it, the
// corpus's; and under the corpus's allow-list both admit it or both refuse
// it. Otherwise admission would judge one host while the operator connects
// to another, or admit a template whose content the operator then refuses.
func TestAdmissionReadsLinksAsTheOperator(t *testing.T) {
	// In the first namespace no host is allowed, so the policy names the
	// host it reads in every link it can read; in the second the corpus's
	// allow-list applies.
	const reading, judging = "kcp-admission-reading", "kcp-admission-judging"
	installAdmission(t, reading, "listed.invalid")
	installAdmission(t, judging, strings.Join(linkcorpus.AllowedHosts, ","))
	anyHost, err := fetch.New()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	allowList, err := fetch.New(fetch.WithAllowedHosts(linkcorpus.AllowedHosts...))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	var admitted, refusedHost, refusedBySchema, refusedByPolicy int
	for i, c := range linkcorpus.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			g := NewWithT(t)
			// A module name is letters: link-aaa, link-aab, …
			template := "link-" + string([]byte{byte('a' + i/676%26), byte('a' + i/26%26), byte('a' + i%26)})

			operatorHost, err := anyHost.LinkHost(c.Link)
			g.Expect(operatorHost).To(Equal(c.Host), "the operator reads %q: %v", c.Link, err)

			refusal := admit(reading, template, c.Link)
			g.Expect(refusal).To(HaveOccurred(), "admitted %q although no host is allowed", c.Link)
			policyHost := ""
			switch msg := refusal.Error(); {
			case hostOfRefusal.MatchString(msg):
				policyHost = hostOfRefusal.FindStringSubmatch(msg)[1]
			case strings.Contains(msg, unreadableLink):
				refusedByPolicy++
			case strings.Contains(msg, "must be of type uri"):
				// The CRD's format: uri refuses it before the policy
				// sees it; the policy's isURL() is the same check.
				refusedBySchema++
			default:
				t.Fatalf("refused %q for another reason: %v", c.Link, refusal)
			}
			g.Expect(policyHost).To(Equal(operatorHost), "the policy and the operator read %q differently: %v", c.Link, refusal)

			_, operatorRefusal := allowList.LinkHost(c.Link)
			policyRefusal := admit(judging, template, c.Link)
			g.Expect(policyRefusal == nil).To(Equal(operatorRefusal == nil),
				"with hosts %v, %q: the policy says %v, the operator says %v", linkcorpus.AllowedHosts, c.Link, policyRefusal, operatorRefusal)
			switch {
			case policyRefusal == nil:
				admitted++
			case policyHost != "":
				refusedHost++
			}
		})
	}
	t.Logf("%d links read alike: %d admitted, %d refused for their host, %d refused as unreadable by the policy and %d by the CRD's format: uri before it",
		len(linkcorpus.Cases()), admitted, refusedHost, refusedByPolicy, refusedBySchema)
}

// hostOfRefusal finds the host in the policy's refusal of a template with
// one link on a host not allowed.
var hostOfRefusal = regexp.MustCompile(`links content on (\S+), which is not an allowed content host`)

// admit asks the API server to admit a template with the given links
// (rawManifest, crds, …) in namespace, in a dry run: nothing is stored, so
// a test can ask again, and a -count rerun too.
func admit(namespace, module string, links ...string) error {
	t := samplemodules.Version{Module: module, Version: "1.0.0"}.Template(namespace, nil)
	for i, l := range links {
		t.Spec.Resources = append(t.Spec.Resources, v1beta2.ContentResource{
			Name: []string{v1beta2.RawManifestResourceName, v1beta2.CRDsResourceName, v1beta2.HelmChartResourceName}[i], Link: l})
	}
	return env.kcpClient.Create(context.Background(), t, client.DryRunAll)
}

// installAdmission installs config/admission as an SRE does for an
// operator whose --namespace is namespace, allowing allowedHosts, and
// waits until the API server applies it. The namespaces of the tests share
// the cluster-wide policy, each with its own binding. Installing again
// (another test, a -count rerun) changes nothing; nothing is removed, as
// the bindings select only the tests' namespaces.
func installAdmission(t *testing.T, namespace, allowedHosts string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	g.Expect(client.IgnoreAlreadyExists(env.kcpClient.Create(ctx, ns))).To(Succeed())

	for _, file := range []string{"content-hosts-policy.yaml", "content-hosts-params.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "admission", file))
		g.Expect(err).NotTo(HaveOccurred())
		objs, err := render.Raw([]byte(strings.ReplaceAll(string(data), "kcp-system", namespace)))
		g.Expect(err).NotTo(HaveOccurred())
		for _, obj := range objs {
			switch obj.GetKind() {
			case "ValidatingAdmissionPolicyBinding":
				obj.SetName(obj.GetName() + "-" + namespace)
			case "ConfigMap":
				g.Expect(unstructured.SetNestedField(obj.Object, allowedHosts, "data", "allowedHosts")).To(Succeed())
			}
			g.Expect(createOrUpdate(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
	}

	// The policy takes effect shortly after it is created: a link with a
	// fragment other than the pin is refused once it does.
	g.Eventually(func() error {
		return admit(namespace, "probe", "https://probe.invalid/m.yaml#v1")
	}, timeout, interval).Should(MatchError(ContainSubstring(unreadableLink)))
}

func createOrUpdate(ctx context.Context, obj *unstructured.Unstructured) error {
	err := env.kcpClient.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(obj.GroupVersionKind())
	if err := env.kcpClient.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return env.kcpClient.Update(ctx, obj)
}

package content

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// admissionNamespace stands for the KCP namespace of an installation of
// config/admission: the shipped files name kcp-system, which an SRE
// replaces with the operator's --namespace, as this test does. (The
// operator of the other tests keeps kcp-system, unaffected.)
const admissionNamespace = "kcp-admission"

// The shipped ValidatingAdmissionPolicy refuses a ModuleTemplate whose links
// leave the allowed hosts, with a message saying what to do, and admits
// one whose links stay on them.
func TestAdmissionRefusesTemplatesLinkingOtherHosts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.kcpClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admissionNamespace}})).To(Succeed())

	var objs []*unstructured.Unstructured
	for _, file := range []string{"content-hosts-policy.yaml", "content-hosts-params.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "admission", file))
		g.Expect(err).NotTo(HaveOccurred())
		parsed, err := render.Raw([]byte(strings.ReplaceAll(string(data), "kcp-system", admissionNamespace)))
		g.Expect(err).NotTo(HaveOccurred())
		objs = append(objs, parsed...)
	}
	for _, obj := range objs {
		if obj.GetKind() == "ConfigMap" {
			g.Expect(unstructured.SetNestedField(obj.Object, "registry.allowed.example,*.example.org,127.0.0.1:5000", "data", "allowedHosts")).To(Succeed())
		}
		g.Expect(env.kcpClient.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, obj) })
	}

	template := func(name string, links ...string) client.Object {
		t := samplemodules.Version{Module: name, Version: "1.0.0"}.Template(admissionNamespace, nil)
		for i, l := range links {
			t.Spec.Resources = append(t.Spec.Resources, v1beta2.ContentResource{Name: []string{"rawManifest", "crds"}[i], Link: l})
		}
		return t
	}
	digest := "@sha256:" + strings.Repeat("ab", 32)

	// The policy takes effect shortly after it is created.
	var refusal error
	bad := template("bad", "oci://registry.allowed.example/modules/bad"+digest, "https://evil.example.net/crds.yaml")
	NewWithT(t).Eventually(func(g Gomega) {
		err := env.kcpClient.Create(ctx, bad.DeepCopyObject().(client.Object))
		refusal = err
		g.Expect(err).To(MatchError(ContainSubstring(
			"ModuleTemplate bad-1.0.0 links content on evil.example.net, which is not an allowed content host " +
				"(registry.allowed.example, *.example.org, 127.0.0.1:5000). Publish the content to an allowed registry, " +
				"or ask the SREs to add the host to ConfigMap " + admissionNamespace + "/lifecycle-manager-content-hosts")))
	}, timeout, interval).Should(Succeed())
	t.Logf("Refused: %v", refusal)

	for _, refused := range []client.Object{
		template("other-port", "oci://127.0.0.1:5001/modules/x"+digest),
		template("missing-host", "oci:///modules/x"+digest),
		template("lookalike", "https://example.org.evil.example/m.yaml"),
		template("userinfo-trick", "https://registry.allowed.example@evil.example.net/m.yaml"),
	} {
		g.Expect(env.kcpClient.Create(ctx, refused)).To(MatchError(ContainSubstring("which is not an allowed content host")), refused.GetName())
	}
	for _, admitted := range []client.Object{
		template("good", "oci://registry.allowed.example/modules/good"+digest, "oci://registry.allowed.example:443/modules/good:1.0.0"),
		template("subdomain", "https://charts.example.org/sample.tgz", "https://user:pw@cdn.charts.example.org/crds.yaml"),
		template("listed-port", "oci://127.0.0.1:5000/modules/x"+digest),
	} {
		g.Expect(env.kcpClient.Create(ctx, admitted)).To(Succeed(), admitted.GetName())
		t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, admitted) })
	}
}

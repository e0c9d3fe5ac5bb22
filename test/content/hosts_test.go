package content

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// Links that leave the allowed hosts, redirects to other hosts and
// registry errors each put their Manifest in Error with a clear, bounded
// message that carries nothing of a response body; the good module next to
// them becomes Ready.
func TestLinksStayOnAllowedHosts(t *testing.T) {
	g := NewWithT(t)
	zeroPin := "#sha256=" + strings.Repeat("0", 64)
	long := "http://content.invalid/" + strings.Repeat("a-very-long-path/", 200) + "m.yaml" + zeroPin
	modules := map[string]struct {
		link string
		want string
	}{
		"cloud-metadata":  {link: "http://169.254.169.254/latest/meta-data/iam" + zeroPin, want: "host 169.254.169.254 is not an allowed content host"},
		"private-network": {link: "http://10.0.0.1:8080/m.yaml" + zeroPin, want: "host 10.0.0.1:8080 is not an allowed content host"},
		"private-registry": {link: "oci://10.0.0.1:5000/modules/x@sha256:" + strings.Repeat("ab", 32),
			want: "host 10.0.0.1:5000 is not an allowed content host"},
		"loopback":       {link: env.unlisted.URL + "/m.yaml" + zeroPin, want: "host " + hostOf(env.unlisted) + " is not an allowed content host"},
		"redirect":       {link: env.web.URL + "/redirect" + zeroPin, want: "to another host, " + hostOf(env.unlisted) + ", is refused"},
		"server-error":   {link: env.web.URL + "/error" + zeroPin, want: "server answered 500 Internal Server Error"},
		"registry-error": {link: env.registry.Link("modules/failing", failing), want: "registry answered 500 Internal Server Error"},
		"long-link":      {link: long, want: "… (truncated)"},
	}
	names := []string{samplemodules.Sample}
	for name, m := range modules {
		publishModule(t, name, map[string]string{v1beta2.RawManifestResourceName: m.link})
		names = append(names, name)
	}
	kyma := newKyma(t, names...)

	for name, m := range modules {
		msg := eventuallyError(t, kyma, name, m.want)
		t.Logf("%s: %s", name, msg)
		g.Expect(msg).NotTo(ContainSubstring(marker), name)
		g.Expect(len(msg)).To(BeNumerically("<=", 1024), name)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		m := manifest(g, kyma, samplemodules.Sample)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateReady), readyMessage(m))
	}, timeout, interval).Should(Succeed())

	for _, name := range []string{"server-error", "registry-error"} {
		m := manifest(g, kyma, name)
		g.Expect(m.Status.LastOperation.Operation).NotTo(ContainSubstring(marker))
	}
	g.Expect(eventsMentioning(g, marker)).To(BeEmpty())
}

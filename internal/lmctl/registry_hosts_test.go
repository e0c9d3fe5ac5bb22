package lmctl

import (
	"testing"

	. "github.com/onsi/gomega"
)

// lmctl reads --insecure-registries as the operator does: entries are
// trimmed and lower-cased, a host alone covers its ports, and a malformed
// entry is an error (backup) or matches nothing (module sign).
func TestInsecureRegistriesAreReadAsTheOperatorReadsThem(t *testing.T) {
	g := NewWithT(t)
	hosts, err := registryHosts([]string{"Registry.local:5000", " localhost:5000", "kind-registry"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hosts).To(Equal([]string{"registry.local:5000", "localhost:5000", "kind-registry"}))
	_, err = registryHosts([]string{"localhost:5000", "http://registry.local"})
	g.Expect(err).To(MatchError(ContainSubstring("--insecure-registries entry 2")))

	flags := registryFlags{insecure: []string{" localhost:5000", "kind-registry", "http://bad"}}
	g.Expect(flags.options("oci://localhost:5000/modules/m:1")).To(HaveLen(2), "keychain and plain HTTP")
	g.Expect(flags.options("oci://kind-registry:5001/modules/m:1")).To(HaveLen(2), "a host alone covers its ports")
	g.Expect(flags.options("oci://other:5000/modules/m:1")).To(HaveLen(1), "keychain only")
}

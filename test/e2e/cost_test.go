package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// writes counts the write requests (not dry-run) a runtime's API server has
// served for a resource, from its own metrics.
func (k *testKyma) writes(g Gomega, resource string) float64 {
	return k.requests(g, func(labels map[string]string) bool {
		if labels["resource"] != resource || labels["dry_run"] != "" || labels["subresource"] != "" {
			return false
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
			return true
		}
		return false
	})
}

// TestSyncCostsNoWriteWhenSteadyAndOneWritePerChange measures, with the
// runtime API server's own request counters, what keeping a runtime in step
// costs: nothing while nothing changes, one write for one new template.
// Not parallel: another test's template would be copied into this runtime
// too, so it runs alone, before the parallel tests.
func TestSyncCostsNoWriteWhenSteadyAndOneWritePerChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newKyma(t, module(samplemodules.Evolving))
	k.eventuallyReady(t)
	g.Eventually(func() error { _, err := k.runtimeTemplate("sample-1.0.0"); return err }, timeout, interval).Should(Succeed())

	// Let the runtime's Kyma status settle, then watch a steady state over
	// more than two Ready intervals (2s here): drift checks, CRD sync,
	// runtime Kyma sync and the catalog's full pass write nothing.
	g.Eventually(func(g Gomega) {
		g.Expect(k.runtimeKyma(g).Status.State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())
	before := k.writes(g, "moduletemplates")
	steady := map[string]float64{}
	for _, resource := range []string{"kymas", "customresourcedefinitions", "configmaps", "modulereleasemetas"} {
		steady[resource] = k.writes(g, resource)
	}
	g.Consistently(func(g Gomega) {
		g.Expect(k.writes(g, "moduletemplates")).To(Equal(before), "a steady catalog costs no write")
		for resource, n := range steady {
			g.Expect(k.writes(g, resource)).To(Equal(n), "a steady runtime costs no write of %s", resource)
		}
	}, "5s", "500ms").Should(Succeed())

	extra := &v1beta2.ModuleTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "cost-extra-1.0.0", Namespace: kcpNamespace},
		Spec:       v1beta2.ModuleTemplateSpec{ModuleName: "cost-extra", Version: "1.0.0"},
	}
	g.Expect(env.kcpClient.Create(ctx, extra)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(ctx, extra) })
	g.Eventually(func() error { _, err := k.runtimeTemplate(extra.Name); return err }, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(k.writes(g, "moduletemplates")-before).To(Equal(1.0), "one new template, one write")
	}, "3s", "500ms").Should(Succeed())
}

// configMapRequests matches the runtime API server's requests for
// ConfigMaps with this verb, dry-run or not.
func configMapRequests(verb string, dryRun bool) func(labels map[string]string) bool {
	return func(labels map[string]string) bool {
		return labels["resource"] == "configmaps" && labels["subresource"] == "" && labels["verb"] == verb &&
			(labels["dry_run"] != "") == dryRun
	}
}

// TestFirstInstallCreatesEachObjectWithOneApply adds a module whose two
// ConfigMaps do not exist in the runtime: each is looked up once (it might
// be someone else's) and created with one apply, neither read again nor
// dry-run first.
func TestFirstInstallCreatesEachObjectWithOneApply(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	setChannel(t, samplemodules.Evolving, "cost", "1.0.0")
	k := newKyma(t)
	k.eventuallyReady(t)
	applies, dryRuns, reads := k.requests(g, configMapRequests("APPLY", false)),
		k.requests(g, configMapRequests("APPLY", true)), k.requests(g, configMapRequests("GET", false))

	evolving := module(samplemodules.Evolving)
	evolving.Channel = "cost"
	k.update(t, func(kyma *v1beta2.Kyma) { kyma.Spec.Modules = append(kyma.Spec.Modules, evolving) })
	g.Eventually(func(g Gomega) {
		g.Expect(k.moduleStatus(g, samplemodules.Evolving).State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())

	g.Expect(k.requests(g, configMapRequests("APPLY", false))-applies).To(Equal(2.0), "one apply per ConfigMap")
	g.Expect(k.requests(g, configMapRequests("APPLY", true))-dryRuns).To(BeZero(), "no dry-run of an object that did not exist")
	g.Expect(k.requests(g, configMapRequests("GET", false))-reads).To(Equal(2.0), "one ownership lookup per ConfigMap")
}

// TestUpgradeWritesEachObjectWithOneApply upgrades a module: its own
// ConfigMap that changes is written with one apply, not read and dry-run
// first; the new one is looked up and created with one apply; nothing is
// dry-run. (A drift correction of installed content still diffs first, so
// that only what drifted is written and reported: TestDriftIsCorrected.)
func TestUpgradeWritesEachObjectWithOneApply(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	setChannel(t, samplemodules.Evolving, "costupgrade", "1.0.0")
	evolving := module(samplemodules.Evolving)
	evolving.Channel = "costupgrade"
	k := newKyma(t, evolving)
	k.eventuallyReady(t)
	applies, dryRuns := k.requests(g, configMapRequests("APPLY", false)), k.requests(g, configMapRequests("APPLY", true))

	setChannel(t, samplemodules.Evolving, "costupgrade", "2.0.0")
	g.Eventually(func(g Gomega) {
		status := k.moduleStatus(g, samplemodules.Evolving)
		g.Expect(status.Version).To(Equal("2.0.0"))
		g.Expect(status.State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())

	g.Expect(k.requests(g, configMapRequests("APPLY", true))-dryRuns).To(BeZero(), "an upgrade dry-ran objects")
	g.Expect(k.requests(g, configMapRequests("APPLY", false))-applies).To(Equal(2.0),
		"one apply for the changed ConfigMap, one for the new one")
}

package ha

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/fleetbench"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// previousRelease is the operator the upgrade starts from: the build that
// was on main before issue 13's HA work landed. Move it forward when a
// release is cut, so that the test upgrades from what users run.
const previousRelease = "712d02c5cf373c23608e7530bf092d1ff23bc4d6"

// TestUpgradeFromThePreviousBuildWritesNothingToRuntimes runs the previous
// build on a fleet until it is Ready and quiet, stops it the way a node
// failure does (SIGKILL; a rolling update stops it more gently, with SIGTERM), and
// starts this build against the same fleet. The new build looks at every
// Kyma and Manifest once and then keeps looking every Ready interval; the
// runtimes' API servers must count no write from it, no module object may
// change, no Manifest be recreated, and every Kyma stays Ready.
func TestUpgradeFromThePreviousBuildWritesNothingToRuntimes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	previous := startProcess(t, "previous", buildPrevious(t))
	names := []string{"upgrade-0", "upgrade-1"}
	runtimes := map[string]*testcluster.Runtime{}
	var releases []func()
	for i, name := range names {
		runtimes[name] = env.runtimes[i]
		releases = append(releases, createKyma(t, name, env.runtimes[i]))
	}
	for _, name := range names {
		eventuallyReady(g, name)
	}
	// Quiet: over three Ready intervals (2 s) no runtime counts a write.
	g.Eventually(func(g Gomega) {
		before := runtimeWrites(g, runtimes)
		g.Consistently(func(g Gomega) {
			g.Expect(runtimeWrites(g, runtimes)).To(Equal(before))
		}, 6*time.Second, time.Second).Should(Succeed())
	}, timeout, interval).Should(Succeed(), "the previous build's fleet did not become quiet")

	g.Expect(previous.cmd.Kill()).To(Succeed())
	writes := runtimeWrites(g, runtimes)
	manifests := manifestUIDs(g)
	objects := map[string]map[string]string{}
	for _, name := range names {
		objects[name] = moduleVersions(g, runtimes[name])
		g.Expect(objects[name]).NotTo(BeEmpty())
	}

	current := startProcess(t, "current", env.bin)
	// The Kymas go while the new build runs (cleanups run last first).
	t.Cleanup(func() {
		for _, release := range releases {
			release()
		}
	})
	// The new leader (once the killed one's Lease ran out) reconciled every
	// Kyma and Manifest once.
	g.Eventually(func(g Gomega) {
		reconciled := current.reconciled(t)
		for _, name := range names {
			g.Expect(reconciled["kyma"]).To(HaveKey(name))
			g.Expect(reconciled["manifest"]).To(HaveKey(kyma.ManifestName(name, samplemodules.Evolving)))
		}
	}, timeout, interval).Should(Succeed(), "the new build did not reconcile the fleet")
	g.Consistently(func(g Gomega) {
		g.Expect(runtimeWrites(g, runtimes)).To(Equal(writes), "the new build wrote to a runtime")
		for _, name := range names {
			k := &v1beta2.Kyma{}
			g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
			g.Expect(k.Status.State).To(Equal(v1beta2.StateReady))
		}
	}, 6*time.Second, 500*time.Millisecond).Should(Succeed())
	for _, name := range names {
		g.Expect(moduleVersions(g, runtimes[name])).To(Equal(objects[name]), "a module object of %s changed", name)
	}
	g.Expect(manifestUIDs(g)).To(Equal(manifests), "a Manifest was recreated")
	g.Expect(current.cmd.ExitError()).NotTo(HaveOccurred())
}

// buildPrevious builds cmd/lifecycle-manager as of previousRelease, from
// the repository's history (git archive: nothing in the work tree moves).
func buildPrevious(t *testing.T) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", root, previousRelease, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting the previous build's source %s (a shallow clone lacks it; fetch the history): %v\n%s", previousRelease, err, out)
	}
	bin := filepath.Join(env.dir, "lifecycle-manager-previous")
	if err := testcluster.GoBuild(src, "./cmd/lifecycle-manager", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runtimeWrites are the writes each runtime's API server counted, by
// resource.
func runtimeWrites(g Gomega, runtimes map[string]*testcluster.Runtime) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for name, rt := range runtimes {
		r, err := fleetbench.CountRequests(context.Background(), rt.Config())
		g.Expect(err).NotTo(HaveOccurred())
		out[name] = r.WritesByResource
	}
	return out
}

// moduleVersions are the module's ConfigMaps in the runtime: namespace/name
// to uid and resourceVersion.
func moduleVersions(g Gomega, rt *testcluster.Runtime) map[string]string {
	c, err := runtimeClient(rt)
	g.Expect(err).NotTo(HaveOccurred())
	list := &corev1.ConfigMapList{}
	g.Expect(c.List(context.Background(), list, client.MatchingLabels{v1beta2.ModuleNameLabel: samplemodules.Evolving})).To(Succeed())
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Namespace+"/"+cm.Name] = string(cm.UID) + "@" + cm.ResourceVersion
	}
	return out
}

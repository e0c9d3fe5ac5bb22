package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// goodManifest is a module version that installs one ConfigMap. Each call
// makes other bytes (an annotation counts the calls), so that a test run
// again in the same process (go test -count, make test-stress) publishes
// content of a new digest: content already fetched, or signed, by an
// earlier run would otherwise be the operator's without the registry, and
// the failures the test provokes would not happen.
func goodManifest(module, version string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-config\n  annotations:\n    e2e.lifecycle-manager/content: %q\ndata:\n  version: %q\n",
		module, strconv.FormatInt(contentSerial.Add(1), 10), version)
}

// contentSerial counts goodManifest's calls.
var contentSerial atomic.Int64

// publish pushes content as a module version to reg and creates its
// ModuleTemplate.
func publish(t *testing.T, reg *testregistry.Registry, module, version string, content ociartifact.Module) {
	t.Helper()
	g := NewWithT(t)
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:%s", reg.Host(), module, version), content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	template := samplemodules.Version{Module: module, Version: version}.Template(kcpNamespace, artifact.Links)
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
}

// newReleaseMeta creates a module's channel assignment.
func newReleaseMeta(t *testing.T, module string, channels map[string]string) {
	t.Helper()
	g := NewWithT(t)
	meta := samplemodules.ReleaseMeta(kcpNamespace, module, channels)
	g.Expect(env.kcpClient.Create(context.Background(), meta)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), meta) })
}

// installGood installs version 1.0.0 of a fresh module and waits for Ready.
func installGood(t *testing.T, reg *testregistry.Registry, name string) *testKyma {
	t.Helper()
	publish(t, reg, name, "1.0.0", ociartifact.Module{RawManifest: goodManifest(name, "1.0.0")})
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))
	k.eventuallyReady(t)
	return k
}

// expectModuleErrorKeepsInstalled waits for the module to report Error
// and for its Manifest's events to give the cause (raw error text is in
// events, never in conditions), and checks that what 1.0.0 installed is
// still there.
func expectModuleErrorKeepsInstalled(t *testing.T, k *testKyma, module, message string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, module)
		g.Expect(m.State).To(Equal(v1beta2.StateError))
		g.Expect(m.Message).To(ContainSubstring("The module's content cannot be fetched or rendered"))
		g.Expect(k.get(g).Status.State).To(Equal(v1beta2.StateError))
		g.Expect(manifestWarnings(g, kyma.ManifestName(k.name, module))).To(ContainElement(ContainSubstring(message)))
	}, timeout, interval).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, module+"-config")).To(Succeed(), "a failed update deletes nothing")
	g.Expect(cm.Data).To(HaveKeyWithValue("version", "1.0.0"))
}

func expectModuleReadyAt(t *testing.T, k *testKyma, module, version string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		m := k.moduleStatus(g, module)
		g.Expect(m.State).To(Equal(v1beta2.StateReady), m.Message)
		g.Expect(m.Version).To(Equal(version))
		cm := &corev1.ConfigMap{}
		g.Expect(k.inRuntime(cm, module+"-config")).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("version", version))
	}, timeout, interval).Should(Succeed())
}

func TestMissingLayerIsErrorUntilPushed(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const name = "faulty-layer"
	k := installGood(t, env.registry, name)

	// 2.0.0's template links a layer nobody has pushed yet.
	next := ociartifact.Module{RawManifest: goodManifest(name, "2.0.0")}
	sum := sha256.Sum256(next.RawManifest)
	link := fmt.Sprintf("oci://%s/modules/%s@sha256:%s", env.registry.Host(), name, hex.EncodeToString(sum[:]))
	template := samplemodules.Version{Module: name, Version: "2.0.0"}.Template(kcpNamespace, map[string]string{v1beta2.RawManifestResourceName: link})
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
	setChannel(t, name, "regular", "2.0.0")
	expectModuleErrorKeepsInstalled(t, k, name, "the registry has no such layer")

	// Pushing the layer fixes it; nothing else has to change.
	_, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:2.0.0", env.registry.Host(), name), next.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	expectModuleReadyAt(t, k, name, "2.0.0")
}

func TestInvalidYAMLIsErrorUntilFixed(t *testing.T) {
	t.Parallel()
	const name = "faulty-yaml"
	k := installGood(t, env.registry, name)

	publish(t, env.registry, name, "2.0.0", ociartifact.Module{RawManifest: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n")})
	setChannel(t, name, "regular", "2.0.0")
	expectModuleErrorKeepsInstalled(t, k, name, "rendering rawManifest")

	publish(t, env.registry, name, "2.0.1", ociartifact.Module{RawManifest: goodManifest(name, "2.0.1")})
	setChannel(t, name, "regular", "2.0.1")
	expectModuleReadyAt(t, k, name, "2.0.1")
}

func TestChartThatFailsToRenderIsErrorUntilFixed(t *testing.T) {
	t.Parallel()
	const name = "faulty-chart"
	k := installGood(t, env.registry, name)

	broken := packageChart(t, map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: faulty\nversion: 2.0.0\n",
		"templates/boom.yaml": `{{ fail "the chart refuses to render" }}`,
	})
	publish(t, env.registry, name, "2.0.0", ociartifact.Module{HelmChart: broken})
	setChannel(t, name, "regular", "2.0.0")
	expectModuleErrorKeepsInstalled(t, k, name, "the chart refuses to render")

	fixed := packageChart(t, map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: faulty\nversion: 2.0.1\n",
		"templates/config.yaml": string(goodManifest(name, "2.0.1")),
	})
	publish(t, env.registry, name, "2.0.1", ociartifact.Module{HelmChart: fixed})
	setChannel(t, name, "regular", "2.0.1")
	expectModuleReadyAt(t, k, name, "2.0.1")
}

func TestRegistryDownIsErrorUntilBack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const name = "faulty-registry"
	reg := testregistry.Start()
	defer reg.Close()
	k := installGood(t, reg, name)

	publish(t, reg, name, "2.0.0", ociartifact.Module{RawManifest: goodManifest(name, "2.0.0")})
	reg.Stop()
	setChannel(t, name, "regular", "2.0.0")
	expectModuleErrorKeepsInstalled(t, k, name, "connection refused")

	g.Expect(reg.Restart()).To(Succeed())
	expectModuleReadyAt(t, k, name, "2.0.0")
}

func TestRuntimeUnreachableIsErrorUntilBack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const name = "faulty-runtime"
	k := installGood(t, env.registry, name)

	g.Expect(k.runtime.cluster.StopAPIServer()).To(Succeed())
	restarted := false
	defer func() {
		if !restarted {
			_ = k.runtime.cluster.StartAPIServer(context.Background())
		}
	}()
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateError), describe(kyma))
		g.Expect(kyma.Status.Conditions).To(ContainElement(And(
			HaveField("Reason", "RuntimeUnavailable"),
			HaveField("Message", ContainSubstring("connection failed")),
		)), "the condition says the runtime is unreachable, with the class of the cause (the raw error is in events)")
	}, timeout, interval).Should(Succeed())

	g.Expect(k.runtime.cluster.StartAPIServer(context.Background())).To(Succeed())
	restarted = true
	k.eventuallyReady(t)
	expectModuleReadyAt(t, k, name, "1.0.0")
}

func TestKubeconfigSecretMissingOrGarbage(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "faulty-secret"
	publish(t, env.registry, name, "1.0.0", ociartifact.Module{RawManifest: goodManifest(name, "1.0.0")})
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))

	secret := &corev1.Secret{}
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name + "-kubeconfig"}, secret)).To(Succeed())
	good := secret.Data["config"]
	k.eventuallyReady(t)

	// Garbage in the Secret.
	secret.Data["config"] = []byte("this is not a kubeconfig")
	g.Expect(env.kcpClient.Update(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateError))
		g.Expect(kyma.Status.Conditions).To(ContainElement(And(
			HaveField("Reason", "RuntimeUnavailable"),
			HaveField("Message", ContainSubstring("does not parse as a kubeconfig")),
		)))
	}, timeout, interval).Should(Succeed())

	// No Secret at all.
	g.Expect(env.kcpClient.Delete(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		kyma := k.get(g)
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateError))
		g.Expect(kyma.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("no kubeconfig Secret"))))
	}, timeout, interval).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, name+"-config")).To(Succeed(), "losing access deletes nothing")

	// Registering the runtime again recovers.
	g.Expect(env.kcpClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: k.name + "-kubeconfig", Namespace: kcpNamespace, Labels: secret.Labels},
		Data:       map[string][]byte{"config": good},
	})).To(Succeed())
	k.eventuallyReady(t)
}

// packageChart writes a chart as a .tgz, with its files under one directory
// as helm package lays them out.
func packageChart(t *testing.T, files map[string]string) []byte {
	t.Helper()
	g := NewWithT(t)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		g.Expect(tw.WriteHeader(&tar.Header{Name: "chart/" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})).To(Succeed())
		_, err := tw.Write([]byte(content))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(tw.Close()).To(Succeed())
	g.Expect(gz.Close()).To(Succeed())
	return buf.Bytes()
}

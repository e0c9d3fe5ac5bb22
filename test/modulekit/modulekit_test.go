package modulekit

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
)

const (
	timeout  = 2 * time.Minute
	interval = 200 * time.Millisecond
)

// lmctlRun runs lmctl's command line in-process with args and returns its
// stdout.
func lmctlRun(t *testing.T, args ...string) string {
	t.Helper()
	cmd := lmctl.NewCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("lmctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// signingKeys writes a new ECDSA P-256 key pair as PEM files.
func signingKeys(t *testing.T) (priv, pub string) {
	t.Helper()
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv, pub = filepath.Join(dir, "module.key"), filepath.Join(dir, "module.pub")
	for path, data := range map[string][]byte{priv: privPEM, pub: pubPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return priv, pub
}

// kubectlApply applies every document of a YAML stream to the control plane
// with server-side apply, as `kubectl apply --server-side -f` does.
func kubectlApply(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("parsing the printed YAML: %v\n%s", err, doc)
		}
		//nolint:staticcheck // client.Apply with unstructured is what kubectl apply --server-side does
		if err := env.e.Client.Patch(context.Background(), obj, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// The module team's journey: build, push, apply what push printed, and a
// runtime that lists the module gets it Ready; the template operator has
// reconciled the default CR. The next version goes to the fast channel and
// the runtime, moved to fast, upgrades. Deleting the Kyma removes it all.
func TestBuildPushApplyReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	moduleFile := filepath.Join("..", "..", "modules", "template-operator", "module.yaml")
	layout := filepath.Join(t.TempDir(), "oci")

	out := lmctlRun(t, "module", "build", "-f", moduleFile, "--layout", layout)
	g.Expect(out).To(ContainSubstring("Built template-operator 1.0.0"))
	g.Expect(filepath.Join(layout, "index.json")).To(BeAnExistingFile())

	printed := lmctlRun(t, "module", "push", "-f", moduleFile, "--layout", layout,
		"--registry", env.registry.Host()+"/modules", "--insecure", "-n", kcpNamespace)
	objs := kubectlApply(t, printed)
	g.Expect(objs).To(HaveLen(2))
	g.Expect(objs[0].GetKind()).To(Equal("ModuleTemplate"))
	g.Expect(objs[1].GetKind()).To(Equal("ModuleReleaseMeta"))

	template := &v1beta2.ModuleTemplate{}
	g.Expect(env.e.Client.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: "template-operator-1.0.0"}, template)).To(Succeed())
	g.Expect(template.Spec.Resources).NotTo(BeEmpty())
	for _, r := range template.Spec.Resources {
		g.Expect(r.Link).To(MatchRegexp(`^oci://[^@]+@sha256:[0-9a-f]{64}$`), "pinned by digest")
	}
	g.Expect(template.Spec.RBAC).NotTo(BeNil())

	register(t, "runtime-kit", templateoperator.Name)

	g.Eventually(func(g Gomega) {
		kyma := &v1beta2.Kyma{}
		g.Expect(env.e.Client.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: "runtime-kit"}, kyma)).To(Succeed())
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), testenv.DescribeKyma(kyma))
		g.Expect(kyma.Status.Modules).To(ContainElement(And(
			HaveField("Name", templateoperator.Name), HaveField("Version", "1.0.0"), HaveField("State", v1beta2.StateReady))))
	}, timeout, interval).Should(Succeed())

	rt, err := testenv.NewClient(env.runtime.Config())
	g.Expect(err).NotTo(HaveOccurred())
	sample := &unstructured.Unstructured{}
	sample.SetGroupVersionKind(templateoperator.GVK)
	g.Expect(rt.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: "default"}, sample)).To(Succeed())
	state, _, _ := unstructured.NestedString(sample.Object, "status", "state")
	g.Expect(state).To(Equal("Ready"), "the template operator reports the default CR's state")
	cm := &corev1.ConfigMap{}
	g.Expect(rt.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: "default-greeting"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "hello"))

	// The next version, offered on the fast channel first: build and push
	// it, apply only its template, add the channel to the release meta by
	// hand, and move the runtime's module to fast.
	next := copyModule(t, strings.NewReplacer("version: 1.0.0", "version: 1.1.0", "template-operator:1.0.0", "template-operator:1.1.0"))
	lmctlRun(t, "module", "build", "-f", filepath.Join(next, "module.yaml"))
	// Pushed and signed in one step (push --sign), for registries that
	// require signatures; lmctl module verify checks it as the operator does.
	keyFile, pubFile := signingKeys(t)
	printed = lmctlRun(t, "module", "push", "-f", filepath.Join(next, "module.yaml"),
		"--registry", env.registry.Host()+"/modules", "--insecure", "-n", kcpNamespace, "--sign", keyFile)
	verified := lmctlRun(t, "module", "verify", env.registry.Host()+"/modules/template-operator:1.1.0",
		"--key", pubFile, "--insecure-registries", env.registry.Host())
	g.Expect(verified).To(ContainSubstring("Verified "))
	kubectlApply(t, strings.Split(printed, "\n---\n")[0])
	meta := &v1beta2.ModuleReleaseMeta{}
	g.Expect(env.e.Client.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: templateoperator.Name}, meta)).To(Succeed())
	meta.Spec.Channels = append(meta.Spec.Channels, v1beta2.ChannelVersionAssignment{Channel: "fast", Version: "1.1.0"})
	g.Expect(env.e.Client.Update(ctx, meta)).To(Succeed())
	kyma := &v1beta2.Kyma{}
	g.Expect(env.e.Client.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: "runtime-kit"}, kyma)).To(Succeed())
	kyma.Spec.Modules[0].Channel = "fast"
	g.Expect(env.e.Client.Update(ctx, kyma)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.e.Client.Get(ctx, client.ObjectKeyFromObject(kyma), kyma)).To(Succeed())
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady), testenv.DescribeKyma(kyma))
		g.Expect(kyma.Status.Modules).To(ContainElement(And(
			HaveField("Name", templateoperator.Name), HaveField("Version", "1.1.0"), HaveField("State", v1beta2.StateReady))))
		manager := &appsv1.Deployment{}
		g.Expect(rt.Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: "template-operator-manager"}, manager)).To(Succeed())
		g.Expect(manager.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":1.1.0"))
	}, timeout, interval).Should(Succeed())

	// Removal: the default CR goes first, the template operator takes its
	// ConfigMap and lets go, then the rest of the module.
	g.Expect(env.e.Client.Delete(ctx, kyma)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.e.Client.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, timeout, interval).Should(BeTrue(), "the Kyma is removed with its module")
	g.Expect(apierrors.IsNotFound(rt.Get(ctx, client.ObjectKeyFromObject(cm), cm))).To(BeTrue(), "the template operator removed its ConfigMap")
}

// copyModule writes the template operator's files into a new directory,
// changed by r, as a module team edits its repository.
func copyModule(t *testing.T, r *strings.Replacer) string {
	t.Helper()
	dir := t.TempDir()
	err := fs.WalkDir(templateoperator.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(templateoperator.Files, p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, []byte(r.Replace(string(data))), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// register registers the runtime as a provisioner does: its kubeconfig in
// a Secret labelled with the Kyma's name, then a Kyma listing modules.
func register(t *testing.T, name string, modules ...string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{remote.KubeconfigKey: env.runtime.Kubeconfig()},
	}
	if err := env.e.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: name}},
		Spec:       v1beta2.KymaSpec{Channel: v1beta2.DefaultChannel},
	}
	for _, m := range modules {
		kyma.Spec.Modules = append(kyma.Spec.Modules, v1beta2.Module{Name: m, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete})
	}
	if err := env.e.Client.Create(ctx, kyma); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.e.Client.Delete(ctx, secret) })
}

package backup

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	lmbackup "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

const (
	timeout  = 2 * time.Minute
	interval = 100 * time.Millisecond
)

var sampleGVK = schema.GroupVersionKind{Group: "operator.kyma-project.io", Version: "v1alpha1", Kind: "Sample"}

// register registers a runtime: its kubeconfig Secret and its Kyma,
// labelled for the hourly backups, with the given modules.
func register(t *testing.T, name string, rt *testcluster.Runtime, modules ...string) {
	t.Helper()
	registerFor(t, "hourly", name, rt, modules...)
}

// registerFor registers a runtime whose Kyma the named schedule selects.
func registerFor(t *testing.T, schedule, name string, rt *testcluster.Runtime, modules ...string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": rt.Kubeconfig()},
	}
	k := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{"backup": schedule, v1beta2.BetaLabel: "true"}},
		Spec:       v1beta2.KymaSpec{Channel: "regular"},
	}
	for _, m := range modules {
		k.Spec.Modules = append(k.Spec.Modules, v1beta2.Module{Name: m, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete})
	}
	Expect(env.kcp.Create(ctx, secret)).To(Succeed())
	Expect(env.kcp.Create(ctx, k)).To(Succeed())
}

// unregister deletes a runtime's Kyma, waits until it is gone, and deletes
// its kubeconfig Secret.
func unregister(name string) {
	ctx := context.Background()
	k := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace}}
	Expect(client.IgnoreNotFound(env.kcp.Delete(ctx, k))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(env.kcp.Get(ctx, client.ObjectKeyFromObject(k), &v1beta2.Kyma{}))
	}, timeout, interval).Should(BeTrue())
	Expect(client.IgnoreNotFound(env.kcp.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace}}))).To(Succeed())
}

func runtimeBackup(g Gomega, name string) *v1beta2.RuntimeBackup {
	rb := &v1beta2.RuntimeBackup{}
	g.Expect(env.kcp.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: name}, rb)).To(Succeed())
	return rb
}

// backupAt moves the clock to t and waits until the Kyma's backup of t is
// stored.
func backupAt(name string, t time.Time) {
	clock.SetTime(t)
	Eventually(func(g Gomega) {
		rb := runtimeBackup(g, name)
		g.Expect(rb.Status.LastBackup).To(Equal(backup.Tag(t)), "lastError: %s", rb.Status.LastError)
		g.Expect(rb.Status.NextScheduleTime).NotTo(BeNil())
		g.Expect(rb.Status.NextScheduleTime.After(t)).To(BeTrue())
	}, timeout, interval/2).Should(Succeed())
}

// backupAtNext moves the clock to the Kyma's next scheduled backup, waits
// until it is stored and returns its tag.
func backupAtNext(name string) string {
	next := nextScheduleTime(name)
	backupAt(name, next)
	return backup.Tag(next)
}

// advance moves the clock forward to t (never back: other tests' Kymas share it).
func advance(t time.Time) {
	if t.After(clock.Now()) {
		clock.SetTime(t)
	}
}

func sampleCR(g Gomega, c client.Client) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(sampleGVK)
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: "default"}, cr)).To(Succeed())
	return cr
}

// A runtime is backed up with what its owner chose (a module added in the
// runtime's own Kyma, the module CR's spec changed there), deleted, and
// registered again with the same Kyma name on another, empty cluster. A
// restore with a wrong key is refused and changes nothing; the restore
// with the right key brings back the Kyma's modules, the owner's module and
// the CR's spec; the owner's other CRs of the module's CRD, in two
// namespaces, and the Secret one refers to come back in dependency order,
// and what the new runtime has already is left as it is.
func TestBackupDeleteRestore(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const name = "restore-me"
	register(t, name, env.runtimes[0], "sample")

	// The owner adds a module in the runtime and configures the sample.
	Eventually(func(g Gomega) {
		rk := &v1beta2.Kyma{}
		g.Expect(env.rt[0].Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}, rk)).To(Succeed())
		rk.Spec.Modules = append(rk.Spec.Modules, v1beta2.Module{Name: "evolving", Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete})
		rk.Labels["owner-label"] = "kept"
		g.Expect(env.rt[0].Update(ctx, rk)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	ownerSpec := map[string]any{"greeting": "hello from the owner", "replicas": int64(3)}
	Eventually(func(g Gomega) {
		cr := sampleCR(g, env.rt[0])
		g.Expect(unstructured.SetNestedMap(cr.Object, ownerSpec, "spec")).To(Succeed())
		g.Expect(env.rt[0].Update(ctx, cr)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	Eventually(func(g Gomega) {
		k := &v1beta2.Kyma{}
		g.Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
		g.Expect(k.Status.Modules).To(ContainElements(HaveField("Name", "sample"), HaveField("Name", "evolving")))
		g.Expect(k.Status.RuntimeModules).To(ContainElement(HaveField("Name", "evolving")))
	}, timeout, interval).Should(Succeed())
	// The owner's own objects: CRs of the module's CRD in two namespaces,
	// the Secrets they refer to, and what a backup leaves out.
	owned := createOwnerObjects(env.rt[0])

	taken := backupAtNext(name)
	rb := runtimeBackup(Default, name)
	Expect(rb.Status.Count).To(BeNumerically(">=", 1))
	Expect(rb.Status.LastSize).To(BeNumerically(">", 0))
	Expect(rb.Status.Repository).To(Equal(env.registry.Host() + "/backups"))
	Expect(rb.Status.KeyFingerprints).To(HaveLen(1))
	Expect(rb.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue))))
	Expect(rb.Status.Backups).To(ContainElement(HaveField("Tag", taken)))

	original := &v1beta2.Kyma{}
	Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, original)).To(Succeed())

	// The runtime is lost with the owner's objects; its backups stay, the
	// grace period starts.
	deleteNamespaces(env.rt[0], owned.teamA, owned.teamB)
	unregister(name)
	Eventually(func(g Gomega) {
		rb := runtimeBackup(g, name)
		g.Expect(rb.Status.DeleteAfter).NotTo(BeNil())
		g.Expect(rb.Status.Conditions).To(ContainElement(HaveField("Reason", "KymaDeleted")))
	}, timeout, interval).Should(Succeed())

	// A new, empty cluster registered under the same name. It has one
	// of the owner's Namespaces and a Secret of the same name already:
	// a restore leaves them as they are.
	register(t, name, env.runtimes[1])
	t.Cleanup(func() { unregister(name) })
	t.Cleanup(func() { deleteNamespaces(env.rt[1], owned.teamA, owned.teamB) })
	Expect(env.rt[1].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: owned.teamB}})).To(Succeed())
	existing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls-cert", Namespace: owned.teamB}, StringData: map[string]string{"tls.crt": "the new runtime's"}}
	Expect(env.rt[1].Create(ctx, existing)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(runtimeBackup(g, name).Status.DeleteAfter).To(BeNil(), "the Kyma is back: no grace period")
	}, timeout, interval).Should(Succeed())

	// The wrong key: refused, clearly, before anything is written.
	wrong, _, err := writeIdentity(t.TempDir(), "wrong.txt")
	Expect(err).NotTo(HaveOccurred())
	opts := lmbackup.RestoreOptions{
		Options: lmbackup.Options{KCP: env.kcp, Namespace: kcpNamespace, Kyma: name, IdentityFiles: []string{wrong}, Store: env.storeOpt},
		Timeout: timeout,
	}
	_, err = lmbackup.Restore(ctx, opts)
	Expect(errors.Is(err, backup.ErrWrongKey)).To(BeTrue(), "%v", err)
	Expect(err.Error()).To(And(ContainSubstring(name+":"+taken), ContainSubstring(rb.Status.KeyFingerprints[0]), ContainSubstring("wrong.txt")))
	Expect(err.Error()).NotTo(ContainSubstring("AGE-SECRET-KEY"))
	k := &v1beta2.Kyma{}
	Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
	Expect(k.Spec.Modules).To(BeEmpty(), "a refused restore writes nothing")

	// The SRE's identity; the newest backup from before the new Kyma.
	opts.IdentityFiles = []string{env.identity}
	res, err := lmbackup.Restore(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Backup).To(Equal(taken))
	Expect(res.Modules).To(Equal([]string{"sample"}))
	Expect(res.RuntimeModules).To(Equal([]string{"evolving"}))
	Expect(res.Format).To(Equal(backup.FormatVersion))
	Expect(res.Failed()).To(BeZero(), "%+v", res.Objects)
	// In dependency order: the Kymas, Namespaces, Secrets, then the
	// custom resources; what exists is skipped.
	Expect(res.Objects).To(HaveExactElements(
		objectResult("Kyma", kcpNamespace, name, lmbackup.Updated),
		objectResult("Kyma", v1beta2.DefaultRuntimeNamespace, v1beta2.DefaultRuntimeKymaName, lmbackup.Updated),
		objectResult("Namespace", "", v1beta2.DefaultRuntimeNamespace, lmbackup.Skipped),
		objectResult("Namespace", "", owned.teamA, lmbackup.Created),
		objectResult("Namespace", "", owned.teamB, lmbackup.Skipped),
		objectResult("Secret", owned.teamA, "db-credentials", lmbackup.Created),
		objectResult("Secret", owned.teamB, "tls-cert", lmbackup.Skipped),
		// The default CR: created, or replaced if the operator was first.
		And(HaveField("Kind", "Sample"), HaveField("Name", "default"), HaveField("Action", BeElementOf(lmbackup.Created, lmbackup.Updated))),
		objectResult("Sample", owned.teamA, "mine", lmbackup.Created),
		objectResult("Sample", owned.teamB, "theirs", lmbackup.Created),
	))
	Expect(res.Objects[8].Module).To(Equal("sample"))

	// The owner's objects are back, as they were.
	for _, cr := range []client.ObjectKey{{Namespace: owned.teamA, Name: "mine"}, {Namespace: owned.teamB, Name: "theirs"}} {
		restored := &unstructured.Unstructured{}
		restored.SetGroupVersionKind(sampleGVK)
		Expect(env.rt[1].Get(ctx, cr, restored)).To(Succeed())
		Expect(restored.Object["spec"]).To(Equal(owned.specs[cr.Name]), "%s", cr)
		Expect(restored.GetLabels()).To(HaveKeyWithValue("team", "a"))
	}
	secret := &corev1.Secret{}
	Expect(env.rt[1].Get(ctx, client.ObjectKey{Namespace: owned.teamA, Name: "db-credentials"}, secret)).To(Succeed())
	Expect(secret.Data).To(HaveKeyWithValue("password", []byte("s3cret")))
	Expect(env.rt[1].Get(ctx, client.ObjectKeyFromObject(existing), secret)).To(Succeed())
	Expect(secret.Data).To(Equal(map[string][]byte{"tls.crt": []byte("the new runtime's")}), "an existing object is left as it is")
	// Left out of the backup: an unreferenced Secret, a CR with an owner.
	Expect(apierrors.IsNotFound(env.rt[1].Get(ctx, client.ObjectKey{Namespace: owned.teamA, Name: "unreferenced"}, &corev1.Secret{}))).To(BeTrue())
	ownedCR := &unstructured.Unstructured{}
	ownedCR.SetGroupVersionKind(sampleGVK)
	Expect(apierrors.IsNotFound(env.rt[1].Get(ctx, client.ObjectKey{Namespace: owned.teamA, Name: "owned"}, ownedCR))).To(BeTrue())

	Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
	Expect(k.Spec.Modules).To(Equal(original.Spec.Modules))
	Expect(k.Spec.Channel).To(Equal(original.Spec.Channel))
	Expect(k.Labels).To(HaveKeyWithValue(v1beta2.BetaLabel, "true"))
	Eventually(func(g Gomega) {
		rk := &v1beta2.Kyma{}
		g.Expect(env.rt[1].Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}, rk)).To(Succeed())
		g.Expect(rk.Spec.Modules).To(ConsistOf(HaveField("Name", "evolving")))
		g.Expect(rk.Labels).To(HaveKeyWithValue("owner-label", "kept"), "the owner's label on the runtime's Kyma")
		spec, _, _ := unstructured.NestedMap(sampleCR(g, env.rt[1]).Object, "spec")
		g.Expect(spec).To(Equal(ownerSpec), "the CR's spec as the owner left it")
		k := &v1beta2.Kyma{}
		g.Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, k)).To(Succeed())
		g.Expect(k.Status.Modules).To(ContainElements(HaveField("Name", "sample"), HaveField("Name", "evolving")))
	}, timeout, interval).Should(Succeed())
	// The operator uses the restored CR as it is: it stays the owner's.
	Consistently(func(g Gomega) {
		spec, _, _ := unstructured.NestedMap(sampleCR(g, env.rt[1]).Object, "spec")
		g.Expect(spec).To(Equal(ownerSpec))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}
